"""A service that answers server-sent events, relayed by its sidecar as they arrive.

A capability configured with `stream: true` is called on a connection of its own
(`call_service(..., stream=True)`: `Accept: text/event-stream`). Once the answer's head
is in: an event stream becomes the handler's events, each yielded as soon as its blank
line has come, unchanged (the answer mapping does not apply to events); any other answer
is read whole and mapped as a plain call's. Failures keep `call_service`'s meaning:
before the first event they are the handler's failure; after it the stream ends
unfinished, which the coordinator reports as broken and never re-sends. When the caller
leaves, the connection to the service is closed, so the service learns it too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agent_reach.adapters.exchange import agent_errors
from agent_reach.errors import AgentFailed
from agent_reach.sdk.streams import StreamEvent
from agent_reach.wire.pool_stream import StreamResponse
from agent_reach.wire.sse import SseFramer


def relayed(answer: Any, timeout_s: float) -> Any:
    """`call_service`'s answer as the handler returns it: an event stream's events as an
    async iterator (`timeout_s` covers the whole stream), any other result as it is."""
    if isinstance(answer, StreamResponse):
        return _events(answer, timeout_s)
    return answer


async def _events(response: StreamResponse, timeout_s: float) -> AsyncIterator[StreamEvent]:
    framer = SseFramer()
    try:
        while True:
            with agent_errors(timeout_s):
                chunk = await response.next_chunk()
            if chunk is None:
                break
            framer.feed(chunk)
            for event in framer.events:
                yield StreamEvent(event["event"], event["data"], event.get("id"))
            framer.events.clear()
        if framer.finish():
            raise AgentFailed(
                "the service's stream ended in the middle of an event", outcome_unknown=True
            )
    finally:
        response.close()
