"""A streamed answer from the agent's first event to the coordinator's last one.

The `http` transport returns an `EventStream` once an agent answers 2xx with
`text/event-stream` to a delivery whose caller asked for a stream. The attempt loop and
the invoke service each add an end hook; the edge server drives `relay`, which
forwards the agent's events as they complete, then runs the hooks once with how the
stream ended (`StreamEnd`) and writes the coordinator's last event: `reach.end` with
the invoke answer, or `reach.error` with the error body. Nothing is re-sent once the
stream has begun: a stream that breaks, passes its deadline or is left by its caller
ends there, and that ending is what the trace, the instance's stats and the decision
record show. `abort` (the caller has gone) closes the agent's connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agent_reach.errors import AgentFailed, AgentTimeout, InvalidRequest, ReachError
from agent_reach.wire import pool
from agent_reach.wire.pool_stream import StreamResponse
from agent_reach.wire.sse import SseFramer, encode_event, sse_event

END_EVENT = "reach.end"  # the coordinator's last event of a stream that ended well
ERROR_EVENT = "reach.error"  # ... of one that did not, with the error body
CALLER_GONE = "caller_disconnected"  # the outcome of a stream its caller left

Write = Callable[[bytes], Awaitable[None]]


@dataclass(slots=True)
class StreamEnd:
    """How a stream ended: `outcome` "ok", an error code, or `CALLER_GONE`."""

    outcome: str
    error: ReachError | None
    events: int
    result: dict[str, Any]  # the assembled answer of the events forwarded
    elapsed_s: float
    first_event_s: float | None  # from the head to the first event forwarded
    document: dict[str, Any] | None = None  # set by a hook: the data of the last event


EndHook = Callable[[StreamEnd], Awaitable[None]]
Translate = Callable[[dict[str, Any]], dict[str, Any] | None]


@dataclass(slots=True)
class EventStream:
    """An agent's event stream, read within the timeout that covers the whole stream."""

    response: StreamResponse | None  # None: an answer that was whole from the start
    timeout_s: float
    hooks: list[EndHook] = field(default_factory=list)
    framer: SseFramer = field(default_factory=SseFramer)
    aborted: bool = False
    document: dict[str, Any] | None = None  # the last event's data, when known up front
    # Each complete event of the agent as the caller gets it (None: not forwarded); a
    # ReachError ends the stream. Without it the agent's bytes go out as they came.
    translate: Translate | None = None

    @classmethod
    def of_answer(cls, document: dict[str, Any]) -> EventStream:
        """A whole answer as a stream of one event (`reach.end`, or `reach.error`)."""
        return cls(None, 0.0, document=document)

    def on_end(self, hook: EndHook) -> None:
        """Run `hook` once the stream has ended, after the hooks added before it."""
        self.hooks.append(hook)

    def abort(self) -> None:
        """The caller has gone: stop reading and close the agent's connection."""
        self.aborted = True
        if self.response is not None:
            self.response.close()

    async def relay(self, write: Write) -> StreamEnd:
        """Forward the events, run the end hooks, write the last event; how it ended."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        first: float | None = None
        error: ReachError | None = None
        try:
            while (chunk := await self._next()) is not None:
                if chunk:
                    first = loop.time() - started if first is None else first
                    await write(chunk)
                if self.aborted:
                    break
        except ReachError as exc:
            error = exc
        except asyncio.CancelledError:
            self.aborted = True
            await self._end(started, first, None, loop)
            raise
        finally:
            if self.response is not None:
                self.response.close()
        end = await self._end(started, first, error, loop)
        if not self.aborted:
            failed = end.error is not None or "error" in (end.document or {})
            last = ERROR_EVENT if failed else END_EVENT
            await write(sse_event(last, end.document or {}))
        return end

    async def _end(
        self,
        started: float,
        first: float | None,
        error: ReachError | None,
        loop: asyncio.AbstractEventLoop,
    ) -> StreamEnd:
        self.framer.finish()
        if self.aborted:
            error = InvalidRequest("the caller left before the stream ended", code="disconnected")
        outcome = CALLER_GONE if self.aborted else (error.code if error is not None else "ok")
        end = StreamEnd(
            outcome,
            error,
            len(self.framer.events),
            self.framer.assembled(),
            loop.time() - started,
            first,
            self.document,
        )
        hooks, self.hooks = self.hooks, []
        for hook in hooks:
            await hook(end)
        return end

    async def _next(self) -> bytes | None:
        """The complete events of the next chunk (possibly none yet), None at the end."""
        if self.response is None:
            return None
        try:
            chunk = await self.response.next_chunk()
        except pool.RequestTimeout:
            raise AgentTimeout(
                f"the stream did not end within its deadline ({self.timeout_s:g} s)",
                code="deadline_exceeded",
                outcome_unknown=True,
            ) from None
        except pool.ResponseTooLarge:
            raise _final(
                f"the agent's stream is over {self.response.limit} bytes",
                code="agent_response_too_large",
            ) from None
        except pool.PoolError as exc:
            if self.aborted:
                return None
            raise _final(
                f"the agent's stream broke off before its end: {exc}", code="agent_stream_broken"
            ) from None
        if chunk is None:
            return None
        if self.translate is None:
            return self.framer.feed(chunk)
        events = self.framer.events
        seen = len(events)
        self.framer.feed(chunk)
        translated = [t for t in map(self.translate, events[seen:]) if t is not None]
        events[seen:] = translated
        return b"".join(map(encode_event, translated))


def _final(message: str, *, code: str) -> AgentFailed:
    """A failure once the stream has begun: the agent acted; never retried."""
    return AgentFailed(message, code=code, retryable=False, outcome_unknown=True)
