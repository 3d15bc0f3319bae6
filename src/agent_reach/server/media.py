"""One rule for the body of every `/v1` endpoint: it is JSON.

A body sent without `Content-Type` is read as JSON (curl, `urllib` and hand-written
clients often leave it out); a body that declares JSON (`application/json`, any
`application/*+json` such as `merge-patch+json`) is JSON; a body that declares anything
else is refused with 415 `unsupported_media_type`, which names the header to send.
The one exception: `POST /v1/workflows` also takes YAML (`application/yaml`). Refusing
the types a browser may send cross-origin without asking first (form-encoded, plain
text) also keeps a page from driving the API behind a caller's back.
"""

from __future__ import annotations

from typing import Any

from agent_reach.errors import UnsupportedMediaType
from agent_reach.server.limits import refuse

JSON_MEDIA = b"application/json"
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
_YAML_TOO = "/v1/workflows"  # POST: a named workflow, as JSON or YAML


def _media(value: bytes) -> bytes:
    return value.split(b";", 1)[0].strip().lower()


def is_json(value: bytes) -> bool:
    """Whether a Content-Type value declares JSON (`application/json`, `application/*+json`)."""
    if value == JSON_MEDIA:
        return True
    media = _media(value)
    return media == JSON_MEDIA or (media.startswith(b"application/") and media.endswith(b"+json"))


def check_json_body(content_type: bytes | None, *, yaml: bool = False) -> None:
    """`UnsupportedMediaType` unless the body is declared JSON or not declared at all
    (or, with `yaml`, declared YAML)."""
    if content_type is None or is_json(content_type):
        return
    if yaml and b"yaml" in _media(content_type):
        return
    shown = content_type.decode("latin-1")[:100]
    raise UnsupportedMediaType(
        f"send the body as JSON with 'Content-Type: application/json' (or no Content-Type); "
        f"got 'Content-Type: {shown}'",
        content_type=shown,
        accepted=["application/json", "application/yaml"] if yaml else ["application/json"],
    )


class JsonBodies:
    """Apply the rule to the control plane: a `/v1` request with a body and no
    Content-Type goes on declared `application/json` (so the framework parses it), one
    declaring another type is answered 415 before anything reads it."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] not in _WITH_BODY
            or not scope["path"].startswith("/v1/")
        ):
            await self.app(scope, receive, send)
            return
        content_type: bytes | None = None
        empty = False  # `Content-Length: 0`: nothing to read, whatever it is declared as
        for name, value in scope["headers"]:
            if name == b"content-type":
                content_type = value
            elif name == b"content-length":
                empty = value.strip() == b"0"
        if content_type is None:
            scope = {**scope, "headers": [*scope["headers"], (b"content-type", JSON_MEDIA)]}
        elif not empty:
            yaml = scope["method"] == "POST" and scope["path"].rstrip("/") == _YAML_TOO
            try:
                check_json_body(content_type, yaml=yaml)
            except UnsupportedMediaType as exc:
                await refuse(send, exc)
                return
        await self.app(scope, receive, send)
