"""The coordinator's event feed: what `GET /v1/events` streams as server-sent events.

Registrations, health transitions, scale events and policy changes are published here
as they are seen; each subscriber gets its own bounded queue, and a subscriber too slow
to keep up loses its oldest events (the gap shows in the event ids) rather than
slowing the publisher. The feed is per coordinator: on a shared store every coordinator sees the
registry's changes, so each feed shows them all. A scale event is each coordinator's own
judgement: it is on the feed of a coordinator that saw a capability fall below its
minimum, and one that sees the loss only once a replacement stands saw no breach.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from agent_reach.clock import Clock

EventKind = Literal["registration", "deregistration", "health", "scale", "policy", "kill_switch"]
SUBSCRIBER_QUEUE = 1000  # events held for one slow subscriber before the oldest go


@dataclass(frozen=True, slots=True)
class FeedEvent:
    """One event: its number on this coordinator, kind, wall time and fields."""

    seq: int
    kind: EventKind
    at: float
    data: dict[str, Any]

    def sse(self) -> bytes:
        """The event in text/event-stream framing."""
        body = orjson.dumps({"kind": self.kind, "at": self.at, **self.data})
        return b"id: %d\nevent: %s\ndata: %s\n\n" % (self.seq, self.kind.encode(), body)


class EventFeed:
    """Fan-out of events to every current subscriber."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._seq = itertools.count(1)
        self._subscribers: set[asyncio.Queue[FeedEvent]] = set()

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def publish(self, kind: EventKind, data: dict[str, Any]) -> FeedEvent:
        """Hand `data` to every subscriber now; never blocks."""
        event = FeedEvent(next(self._seq), kind, self.clock.wall(), data)
        for queue in self._subscribers:
            if queue.full():
                queue.get_nowait()  # the oldest goes: a slow reader must not stall the rest
            queue.put_nowait(event)
        return event

    @contextlib.contextmanager
    def subscribe(self) -> Iterator[asyncio.Queue[FeedEvent]]:
        """A queue receiving the events published from now on, while the block runs."""
        queue: asyncio.Queue[FeedEvent] = asyncio.Queue(SUBSCRIBER_QUEUE)
        self._subscribers.add(queue)
        try:
            yield queue
        finally:
            self._subscribers.discard(queue)
