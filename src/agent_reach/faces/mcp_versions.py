"""The MCP protocol versions `/mcp` serves: every one the official SDKs speak.

The Python SDK's server negotiates the handshake-era versions in `initialize` (a version
it serves is echoed, any other gets its latest) and the 2026-07-28 per-request envelope.
The TypeScript SDK still accepts `2024-10-07`, the draft that was published as
`2024-11-05` without a change to what a tools-only server says; the Python server does
not know it, so it is served here as an alias: an `initialize` asking for it is answered
with it, and requests naming it in `MCP-Protocol-Version` are read as `2024-11-05`.
"""

from __future__ import annotations

from typing import Any

import orjson
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from agent_reach.wire.asgi_body import read_body

# alias -> the version the SDK serves it as (same length: a body's length never changes)
ALIASES = {"2024-10-07": "2024-11-05"}
SERVED_VERSIONS = (*ALIASES, *HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
_VERSION_HEADER = b"mcp-protocol-version"

Scope = dict[str, Any]


async def serve_aliases(
    scope: Scope, receive: Any, send: Any, max_body_bytes: int
) -> tuple[Scope, Any, Any]:
    """The request as the SDK can serve it: an aliased version header replaced, and an
    `initialize` asking for an alias read as its target, answered with the alias."""
    headers = scope.get("headers") or []
    version = next((v for k, v in headers if k == _VERSION_HEADER), None)
    if version is not None:
        target = ALIASES.get(version.decode("latin-1"))
        if target is not None:
            rewritten = [(k, target.encode() if k == _VERSION_HEADER else v) for k, v in headers]
            scope = {**scope, "headers": rewritten}
        return scope, receive, send
    if scope["method"] != "POST":
        return scope, receive, send
    # No version header: an `initialize` (or a client from before the header existed).
    body = await read_body(receive, max_body_bytes, None)
    asked = _initialize_version(body)
    target = ALIASES.get(asked or "")
    if asked is None or target is None:
        return scope, _replay(body, receive), send
    body = body.replace(_quoted(asked), _quoted(target), 1)
    return scope, _replay(body, receive), _answering(send, target, asked)


def _initialize_version(body: bytes) -> str | None:
    """The protocolVersion an `initialize` request asks for, if the body is one."""
    if b'"initialize"' not in body:
        return None
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    params = message.get("params")
    asked = params.get("protocolVersion") if isinstance(params, dict) else None
    return asked if isinstance(asked, str) else None


def _quoted(version: str) -> bytes:
    return orjson.dumps(version)


def _replay(body: bytes, receive: Any) -> Any:
    """`receive` giving `body` first, then whatever the client sends next (a disconnect)."""
    pending = [body]

    async def receive_again() -> dict[str, Any]:
        if pending:
            return {"type": "http.request", "body": pending.pop(), "more_body": False}
        message: dict[str, Any] = await receive()
        return message

    return receive_again


def _answering(send: Any, served: str, asked: str) -> Any:
    """`send` naming the alias the client asked for where the SDK names its target."""
    was = b'"protocolVersion":' + _quoted(served)
    now = b'"protocolVersion":' + _quoted(asked)

    async def send_alias(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and was in message.get("body", b""):
            message = {**message, "body": message["body"].replace(was, now)}
        await send(message)

    return send_alias
