"""Handlers that yield: an agent's answer as server-sent events, each sent as it is made.

A handler written as an async generator streams. Every item it yields is one event: a
`str` is its data, a `StreamEvent` names its event and id, anything else is sent as
JSON. A failure before the first event is answered like any handler's failure; after
it the response ends unfinished, which the coordinator reports as a broken stream (it
never re-sends a stream that has begun). When the connection closes (the caller left,
or the deadline passed) the generator is closed at its next `yield`. A repeated
delivery of the same request waits for the run and gets all of its events at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson

from agent_reach.sdk.streams import StreamEvent
from agent_reach.wire.sse import encode_event

DEFAULT_EVENT = "message"  # the event type an SSE reader gives data with no `event:` line


def encode(item: Any) -> bytes:
    """One yielded item in the wire form."""
    if isinstance(item, StreamEvent):
        return encode_event({"event": item.event, "data": item.data, "id": item.id})
    data = item if isinstance(item, str) else orjson.dumps(item).decode()
    return encode_event({"event": DEFAULT_EVENT, "data": data})


class LiveStream:
    """One run of a yielding handler: relayed live to the delivery that started it, kept
    whole for a repeat of the same request."""

    def __init__(
        self, events: AsyncIterator[Any], first: bytes, failed: Callable[[Exception], None]
    ) -> None:
        self._events = events
        self._sent = [first]
        self._failed = failed
        self._taken = False
        self.whole: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    @classmethod
    async def open(
        cls, events: AsyncIterator[Any], failed: Callable[[Exception], None]
    ) -> LiveStream:
        """Wait for the first event, so a handler failing at once fails like any other."""
        try:
            first = encode(await anext(events))
        except StopAsyncIteration:
            first = b""  # a stream of no events: an empty body, still an event stream
        return cls(events, first, failed)

    def take(self) -> bool:
        """True for the first delivery only: it relays the stream as it comes."""
        taken, self._taken = self._taken, True
        return not taken

    async def relay(self) -> AsyncIterator[bytes]:
        """The response body of the delivery that started the run."""
        try:
            yield self._sent[0]
            async for item in self._events:
                chunk = encode(item)
                self._sent.append(chunk)
                yield chunk
        except Exception as exc:
            self._failed(exc)
            self._end(exc)
            raise
        except BaseException:  # the connection closed: the run did not finish
            self._end(RuntimeError("the stream was closed before it ended"))
            raise
        else:
            self.whole.set_result(b"".join(self._sent))
        finally:
            aclose = getattr(self._events, "aclose", None)
            if aclose is not None:
                await aclose()

    def _end(self, exc: Exception) -> None:
        if not self.whole.done():
            self.whole.set_exception(exc)
            self.whole.exception()  # retrieved: nobody may be waiting for a repeat
