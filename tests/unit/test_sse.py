"""Server-sent events read as they arrive: event boundaries, the assembled answer, Accept."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent_reach.errors import AgentTimeout
from agent_reach.sdk.streams import read_events
from agent_reach.wire.sse import SseFramer, accepts_event_stream, assemble, sse_event


def test_only_complete_events_are_forwarded_and_the_rest_waits() -> None:
    framer = SseFramer()
    assert framer.feed(b"data: a\n\ndata: b") == b"data: a\n\n"
    assert framer.feed(b"c\n") == b""
    assert framer.feed(b"\n") == b"data: bc\n\n"
    assert [e["data"] for e in framer.events] == ["a", "bc"]


def test_a_crlf_split_between_chunks_is_one_line_end() -> None:
    framer = SseFramer()
    assert framer.feed(b"event: t\r\ndata: x\r") == b""
    assert framer.feed(b"\n\r\n") == b"event: t\r\ndata: x\r\n\r\n"
    assert framer.events == [{"event": "t", "data": "x"}]


def test_comments_and_events_without_data_are_forwarded_but_not_assembled() -> None:
    framer = SseFramer()
    assert framer.feed(b": ping\n\nevent: e\n\nid: 7\ndata: one\ndata: two\n\n") == (
        b": ping\n\nevent: e\n\nid: 7\ndata: one\ndata: two\n\n"
    )
    assert framer.assembled() == {
        "text": "one\ntwo",
        "events": [{"event": "message", "data": "one\ntwo", "id": "7"}],
    }


def test_an_event_cut_by_the_end_of_the_stream_is_dropped() -> None:
    framer = SseFramer()
    framer.feed(b"data: whole\n\ndata: half")
    assert framer.finish() is True
    assert assemble(b"data: whole\n\ndata: half") == {
        "text": "whole",
        "events": [{"event": "message", "data": "whole"}],
    }


def test_the_coordinators_event_is_one_line_of_json() -> None:
    event = sse_event("reach.end", {"text": "a\nb"})
    assert event == b'event: reach.end\ndata: {"text":"a\\nb"}\n\n'


@pytest.mark.parametrize(
    ("accept", "streams"),
    [
        ("text/event-stream", True),
        ("application/json, text/event-stream;q=0.5", True),
        ("Text/Event-Stream", True),
        ("text/event-stream;q=0", False),
        ("application/json", False),
        ("*/*", False),
        (None, False),
    ],
)
def test_a_caller_asks_for_a_stream_by_naming_it_in_accept(
    accept: str | None, streams: bool
) -> None:
    assert accepts_event_stream(accept) is streams


async def _lines(*lines: str) -> AsyncIterator[str]:
    for line in lines:
        yield line


async def test_the_sdk_raises_the_error_a_stream_ended_with() -> None:
    events = read_events(
        _lines(
            "event: token",
            "data: first",
            "",
            "event: reach.error",
            'data: {"error": {"code": "deadline_exceeded", "message": "late"}}',
            "",
        )
    )
    assert (await anext(events)).data == "first"
    with pytest.raises(AgentTimeout) as ended:
        await anext(events)
    assert ended.value.code == "deadline_exceeded"
