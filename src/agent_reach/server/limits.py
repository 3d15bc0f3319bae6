"""Request body size limit for the control plane, counted on the bytes actually read."""

from __future__ import annotations

from typing import Any

from agent_reach.errors import PayloadTooLarge
from agent_reach.server.responses import dump_json


class BodyLimit:
    """Refuse bodies over `limit` bytes: at once when Content-Length says so, else mid-read."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                await _refuse(send, limit)
                return
        received = 0

        async def counted_receive() -> dict[str, Any]:
            nonlocal received
            message: dict[str, Any] = await receive()
            received += len(message.get("body", b""))
            if received > limit:
                raise PayloadTooLarge(f"the body is larger than {limit} bytes", limit=limit)
            return message

        await self.app(scope, counted_receive, send)


async def _refuse(send: Any, limit: int) -> None:
    body = dump_json(
        PayloadTooLarge(f"the body is larger than {limit} bytes", limit=limit).to_body()
    )
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"connection", b"close")],
        }
    )
    await send({"type": "http.response.body", "body": body})
