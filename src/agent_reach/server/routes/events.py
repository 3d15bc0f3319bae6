"""`GET /v1/events`: the coordinator's event feed as server-sent events.

Registrations, health transitions, scale events and policy changes, each as one
``event: <kind>`` with a JSON ``data`` line; a comment line every `KEEPALIVE_S` keeps
proxies from closing a quiet stream. For observers and admins.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from starlette.responses import StreamingResponse

from agent_reach.observability.events import EventFeed
from agent_reach.server.auth import Observer
from agent_reach.server.runtime import runtime_of

router = APIRouter(prefix="/v1/events", tags=["events"])

KEEPALIVE_S = 15.0  # below nginx's and most proxies' 60 s idle timeouts
KEEPALIVE = b": keepalive\n\n"


@router.get("")
async def stream_events(request: Request, principal: Observer) -> StreamingResponse:
    """Events from now on, until the client disconnects."""
    feed = runtime_of(request).events
    return StreamingResponse(
        _frames(feed),
        media_type="text/event-stream",
        headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
    )


async def _frames(feed: EventFeed) -> AsyncIterator[bytes]:
    with feed.subscribe() as events:
        yield b": subscribed\n\n"  # headers and a first byte at once: the client knows
        while True:
            try:
                event = await asyncio.wait_for(events.get(), KEEPALIVE_S)
            except TimeoutError:
                yield KEEPALIVE
                continue
            yield event.sse()
