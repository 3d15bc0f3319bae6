"""The user's text a request was routed by: kept in memory with its route span and its
decision for whoever may see them, never written to the decision log's target."""

from __future__ import annotations

import orjson

from agent_reach.clock import ManualClock
from agent_reach.model.decisions import RouteDecision
from agent_reach.observability.decision_log import DecisionLog
from agent_reach.observability.spans import TEXT_KEPT_CHARS
from agent_reach.observability.trace_store import TraceStore
from agent_reach.observability.tracing import Tracer

TRACE = "0af7651916cd43dd8448eb211c80319c"
TEXT = "我买的东西怎么还没到"


def _decision() -> RouteDecision:
    return RouteDecision("order.query", "o-1", "best", [], 0.4, "v1", {"match": 0.3})


def _route(tracer: Tracer, clock: ManualClock, text: str | None) -> dict[str, object]:
    tracer.record(
        "route",
        "order.query",
        trace_id=TRACE,
        parent_id=None,
        started=clock.monotonic(),
        status="ok",
        text=text,
    )
    trace = tracer.store.get(TRACE)
    assert trace is not None
    span: dict[str, object] = trace["spans"][0]
    return span


def test_a_route_span_keeps_the_text_and_its_length():
    clock = ManualClock()
    span = _route(Tracer(TraceStore(10, clock), clock), clock, TEXT)
    assert (span["text"], span["text_chars"]) == (TEXT, len(TEXT))


def test_a_long_text_is_kept_cut_and_says_how_long_it_was():
    clock = ManualClock()
    long_text = "订" * (TEXT_KEPT_CHARS + 300)
    span = _route(Tracer(TraceStore(10, clock), clock), clock, long_text)
    assert span["text"] == long_text[:TEXT_KEPT_CHARS]
    assert span["text_chars"] == TEXT_KEPT_CHARS + 300


def test_a_span_without_text_has_no_text_field():
    clock = ManualClock()
    span = _route(Tracer(TraceStore(10, clock), clock), clock, None)
    assert "text" not in span
    assert "text_chars" not in span


async def test_the_decision_keeps_the_text_in_memory_and_never_writes_it(tmp_path):
    path = tmp_path / "decisions.jsonl"
    log = DecisionLog(str(path), ManualClock())
    log.record(_decision(), kind="invoke", request_id="r-1", trace_id=TRACE, text=TEXT)
    log.record(_decision(), kind="invoke", request_id="r-2", trace_id=TRACE)
    await log.aclose()

    assert [d.text for d in log.recent(10)] == [None, TEXT]
    written = path.read_bytes()
    assert TEXT.encode() not in written
    assert all("text" not in orjson.loads(line) for line in written.splitlines())
