"""Streamed invoke answers on the caller's side: server-sent events read as they come.

`ReachClient.invoke_stream` yields each event the agent sent as a `StreamEvent`; the
coordinator's last event (`reach.end`) is yielded too, carrying the whole invoke answer
in `answer`, and a `reach.error` raises the error it carries, by class.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
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


async def read_events(lines: AsyncIterator[str], status: int) -> AsyncIterator[StreamEvent]:
    """The events of an SSE body given as lines (WHATWG field rules, comments skipped)."""
    data: list[str] = []
    name = ""
    event_id: str | None = None
    async for line in lines:
        if line:
            field, colon, value = line.partition(":")
            if not field:
                continue  # a comment
            value = value[1:] if colon and value.startswith(" ") else value
            if field == "data":
                data.append(value)
            elif field == "event":
                name = value
            elif field == "id":
                event_id = value
            continue
        if data:
            yield _event(name or "message", "\n".join(data), event_id, status)
        data, name, event_id = [], "", None


def _event(name: str, data: str, event_id: str | None, status: int) -> StreamEvent:
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
