"""Request limits: header count and size, and the body size counted on the bytes read.

`BodyLimit` guards the control plane; the invoke fast path applies the same
`check_headers` in its own header loop and reads its body with its own counter.
"""

from __future__ import annotations

from typing import Any

from agent_reach.errors import (
    HeadersTooLarge,
    PayloadTooLarge,
    ReachError,
    TargetTooLong,
)
from agent_reach.wire.rendering import error_body, error_headers

MAX_HEADERS = 100  # Apache httpd's LimitRequestFields default; real clients send 5-20
# A single 16 KB header is refused; nginx's default buffers hold 4 x 8 KiB.
MAX_HEADER_BYTES = 16 * 1024
# RFC 9112 §3: senders and recipients should support targets of at least 8,000 octets.
MAX_TARGET_BYTES = 8 * 1024


def check_target(size: int) -> None:
    """`TargetTooLong` for a request target over `MAX_TARGET_BYTES`."""
    if size > MAX_TARGET_BYTES:
        raise TargetTooLong(
            f"send a request target of at most {MAX_TARGET_BYTES} bytes",
            max_target_bytes=MAX_TARGET_BYTES,
        )


def check_headers(count: int, size: int) -> None:
    """`HeadersTooLarge` for more than `MAX_HEADERS` headers or `MAX_HEADER_BYTES` of
    names and values together."""
    if count > MAX_HEADERS or size > MAX_HEADER_BYTES:
        raise HeadersTooLarge(
            f"send at most {MAX_HEADERS} headers and {MAX_HEADER_BYTES} bytes of them",
            max_headers=MAX_HEADERS,
            max_header_bytes=MAX_HEADER_BYTES,
        )


class BodyLimit:
    """Refuse oversized headers at once, and bodies over `limit` bytes: at once when
    Content-Length says so, else as soon as the bytes read pass it."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit
        headers = scope["headers"]
        try:
            check_headers(len(headers), sum(len(n) + len(v) for n, v in headers))
            for name, value in headers:
                if name == b"content-length" and value.isdigit() and int(value) > limit:
                    raise PayloadTooLarge(f"the body is larger than {limit} bytes", limit=limit)
        except ReachError as exc:
            await refuse(send, exc)
            return
        received = 0
        started = refused = False

        async def guarded_send(message: dict[str, Any]) -> None:
            nonlocal started
            if refused:
                return  # the 413 went out; whatever the app answers to its failed read is moot
            started = started or message["type"] == "http.response.start"
            await send(message)

        async def counted_receive() -> dict[str, Any]:
            # Refuse here rather than leave it to the app: FastAPI turns any error while
            # reading a body into its own 400.
            nonlocal received, refused
            message: dict[str, Any] = await receive()
            received += len(message.get("body", b""))
            if received > limit:
                error = PayloadTooLarge(f"the body is larger than {limit} bytes", limit=limit)
                if not (started or refused):
                    await refuse(send, error)
                refused = True
                raise error
            return message

        await self.app(scope, counted_receive, guarded_send)


async def refuse(send: Any, error: ReachError) -> None:
    """Answer `error` and close: the rest of the request is never read."""
    headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
    for name, value in error_headers(error.retry_after(), error.challenge()):
        headers.append((name.encode(), value.encode()))
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": error_body(error)})
