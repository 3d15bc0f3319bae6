"""Streamed invoke answers on the caller's side: server-sent events read as they come.

`ReachClient.invoke_stream` (and `SyncReachClient.invoke_stream`) yields each event the
agent sent as a `StreamEvent`; the
coordinator's last event (`reach.end`) is yielded too, carrying the whole invoke answer
in `answer`, and a `reach.error` raises the error it carries, by class.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import orjson
from pydantic import TypeAdapter

from agent_reach.errors import error_from_body
from agent_reach.model.invocations import InvokeResult

END_EVENT = "reach.end"
ERROR_EVENT = "reach.error"
_INVOKE_RESULT = TypeAdapter(InvokeResult)


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One event: `event` (`message` when the agent named none), `data`, `id` if any;
    `answer` is set on the last one (`reach.end`)."""

    event: str
    data: str
    id: str | None = None
    answer: InvokeResult | None = None


class EventReader:
    """Lines of an SSE body in, events out (WHATWG field rules, comments skipped)."""

    def __init__(self) -> None:
        self.data: list[str] = []
        self.name = ""
        self.id: str | None = None

    def line(self, line: str) -> StreamEvent | None:
        """The event a blank line completes; None for every other line."""
        if line:
            field, colon, value = line.partition(":")
            value = value[1:] if colon and value.startswith(" ") else value
            if field == "data":
                self.data.append(value)
            elif field == "event":
                self.name = value
            elif field == "id":
                self.id = value
            return None
        if not self.data:
            self.name, self.id = "", None
            return None
        event = _event(self.name or "message", "\n".join(self.data), self.id)
        self.data, self.name, self.id = [], "", None
        return event


async def read_events(lines: AsyncIterator[str]) -> AsyncIterator[StreamEvent]:
    """The events of an SSE body given as lines."""
    reader = EventReader()
    async for line in lines:
        if (event := reader.line(line)) is not None:
            yield event


def read_events_sync(lines: Iterator[str]) -> Iterator[StreamEvent]:
    """`read_events` for a blocking client."""
    reader = EventReader()
    for line in lines:
        if (event := reader.line(line)) is not None:
            yield event


def _event(name: str, data: str, event_id: str | None) -> StreamEvent:
    if name == ERROR_EVENT:
        body = orjson.loads(data)
        code = body.get("error", {}).get("code") if isinstance(body, dict) else None
        raise error_from_body(_ERROR_STATUS.get(str(code), 502), body)
    if name == END_EVENT:
        return StreamEvent(name, data, event_id, _INVOKE_RESULT.validate_json(data))
    return StreamEvent(name, data, event_id)


# The HTTP status each mid-stream error would have had as a whole answer: what
# `error_from_body` needs to pick the class when the code alone does not.
_ERROR_STATUS = {"deadline_exceeded": 504, "disconnected": 400}
