"""A request body read whole from ASGI messages, within a byte limit."""

from __future__ import annotations

from typing import Any

from agent_reach.errors import InvalidRequest, PayloadTooLarge


def body_too_large(limit: int) -> PayloadTooLarge:
    """The one refusal of a body over `limit` bytes, whoever counted them."""
    return PayloadTooLarge(f"the body is larger than {limit} bytes", limit=limit)


async def read_body(receive: Any, limit: int, declared: int | None) -> bytes:
    """The whole body from ASGI messages, refusing more than `limit` bytes as soon as
    that is known."""
    if declared is not None and declared > limit:
        raise body_too_large(limit)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise InvalidRequest(
                "the client went away before sending the body", code="disconnected"
            )
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise body_too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
