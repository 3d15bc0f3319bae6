"""Spans, the bounded trace store, the recent-decision ring and traffic from metrics."""

from __future__ import annotations

import sys

import pytest

from agent_reach.clock import ManualClock
from agent_reach.errors import InvalidRequest
from agent_reach.model.decisions import Candidate, RouteDecision
from agent_reach.observability.decision_log import DecisionLog
from agent_reach.observability.otel import OtlpExport, traces_url
from agent_reach.observability.spans import Span
from agent_reach.observability.trace_store import MAX_SPANS_PER_TRACE, TraceFilter, TraceStore
from agent_reach.observability.tracecontext import TraceContext, continue_trace
from agent_reach.observability.tracing import Tracer
from agent_reach.observability.traffic import parse_scrape, quantile, traffic

TRACE = "0af7651916cd43dd8448eb211c80319c"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def tracer(clock: ManualClock) -> Tracer:
    return Tracer(TraceStore(100, clock), clock)


def request_trace(
    tracer: Tracer,
    clock: ManualClock,
    capability: str,
    *outcomes: str,
    trace: TraceContext | None = None,
) -> TraceContext:
    """Record an invoke: a 1 ms route, then one 10 ms attempt per outcome."""
    trace = trace or continue_trace(None)
    span = tracer.start("invoke", trace, capability, "req-1")
    inner = trace.under(span.span_id)
    started = clock.monotonic()
    clock.advance(0.001)
    tracer.record(
        "route", capability, trace_id=trace.trace_id, parent_id=span.span_id,
        started=started, status="ok", agent_id="a-1", note="exact",
    )  # fmt: skip
    for number, outcome in enumerate(outcomes, start=1):
        started = clock.monotonic()
        clock.advance(0.01)
        span_id, _ = inner.child_traceparent()
        tracer.record(
            "attempt", capability, trace_id=trace.trace_id, parent_id=inner.parent_span_id,
            started=started, status=outcome, span_id=span_id, agent_id=f"a-{number}",
            attempt=number,
        )  # fmt: skip
    final = outcomes[-1] if outcomes else "no_instance"
    span.agent_id = f"a-{len(outcomes)}" if final == "ok" else None
    tracer.end(span, final)
    return trace


def test_a_span_is_timed_by_the_clock_and_ends_ok_unless_told(tracer, clock):
    span = tracer.start("invoke", TraceContext(TRACE, "b7ad6b7169203331"), "echo", "req-9")
    clock.advance(0.25)
    tracer.end(span)
    [kept] = tracer.store.get(TRACE)["spans"]  # type: ignore[index]
    assert (kept["parent_id"], kept["status"], kept["note"]) == ("b7ad6b7169203331", "ok", "req-9")
    assert kept["duration_ms"] == pytest.approx(250.0)


def test_the_status_set_on_the_way_wins_over_the_default(tracer):
    span = tracer.start("invoke", TraceContext(TRACE), "echo")
    span.status = "suspended"
    tracer.end(span)
    assert span.status == "suspended" and not span.is_error
    other = tracer.start("invoke", TraceContext(TRACE), "echo")
    tracer.end(other, "agent_timeout")
    assert other.is_error


def test_under_makes_the_span_the_parent_of_what_it_calls():
    trace = TraceContext(TRACE, "b7ad6b7169203331", sampled=False)
    inner = trace.under("00f067aa0ba902b7")
    assert inner == TraceContext(TRACE, "00f067aa0ba902b7", sampled=False)
    assert inner.child_traceparent()[1].endswith("-00")


def test_a_trace_shows_its_spans_in_start_order_with_wall_clock_times(tracer, clock):
    trace = request_trace(tracer, clock, "echo", "agent_timeout", "ok")
    shown = tracer.store.get(trace.trace_id)
    assert shown is not None
    assert [(s["kind"], s["attempt"], s["status"]) for s in shown["spans"]] == [
        ("invoke", 0, "ok"),
        ("route", 0, "ok"),
        ("attempt", 1, "agent_timeout"),
        ("attempt", 2, "ok"),
    ]
    assert [s["offset_ms"] for s in shown["spans"]] == pytest.approx([0, 0, 1, 11])
    assert shown["spans"][0]["start_s"] == pytest.approx(clock.wall() - 0.021)
    summary = shown["summary"]
    assert (summary.status, summary.attempts, summary.retries, summary.request_id) == (
        "ok",
        2,
        1,
        "req-1",
    )
    assert summary.duration_ms == pytest.approx(21.0)


def test_a_nested_invoke_is_not_a_root_and_a_failing_root_decides_the_status(tracer, clock):
    trace = request_trace(tracer, clock, "outer", "ok")
    [attempt] = [s for s in tracer.store.get(trace.trace_id)["spans"] if s["kind"] == "attempt"]  # type: ignore[index]
    nested = TraceContext(trace.trace_id, attempt["span_id"])
    request_trace(tracer, clock, "inner", "ok", trace=nested)
    summary = tracer.store.get(trace.trace_id)["summary"]  # type: ignore[index]
    assert (summary.capability, summary.spans) == ("outer", 6)
    request_trace(tracer, clock, "again", "agent_error", trace=TraceContext(trace.trace_id))
    summary = tracer.store.get(trace.trace_id)["summary"]  # type: ignore[index]
    assert (summary.capability, summary.status, summary.is_error) == ("outer", "agent_error", True)


def test_the_store_evicts_the_oldest_trace_past_its_size(clock):
    tracer = Tracer(TraceStore(3, clock), clock)
    traces = [request_trace(tracer, clock, "echo", "ok").trace_id for _ in range(4)]
    assert len(tracer.store) == 3
    assert tracer.store.get(traces[0]) is None
    recent = tracer.store.recent(TraceFilter(), 10)
    assert [s.trace_id for s in recent] == traces[:0:-1]


def test_a_trace_stops_growing_at_its_span_limit(tracer, clock):
    for _ in range(MAX_SPANS_PER_TRACE + 5):
        tracer.end(tracer.start("context", TraceContext(TRACE), "ctx-1"))
    assert tracer.store.get(TRACE)["summary"].spans == MAX_SPANS_PER_TRACE  # type: ignore[index]
    assert tracer.store.dropped_spans == 5


def test_recent_traces_filter_by_capability_outcome_agent_and_duration(tracer, clock):
    ok = request_trace(tracer, clock, "fast", "ok").trace_id
    retried = request_trace(tracer, clock, "slow", "agent_timeout", "ok").trace_id
    failed = request_trace(tracer, clock, "slow", "agent_error").trace_id
    none = request_trace(tracer, clock, "gone").trace_id

    def ids(**where: object) -> list[str]:
        return [s.trace_id for s in tracer.store.recent(TraceFilter(**where), 10)]  # type: ignore[arg-type]

    assert ids() == [none, failed, retried, ok]
    assert ids(capability="slow") == [failed, retried]
    assert ids(status="error") == [none, failed]
    assert ids(status="no_instance") == [none]
    assert ids(agent_id="a-2") == [retried]
    assert ids(min_ms=15) == [retried]
    assert [s.trace_id for s in tracer.store.recent(TraceFilter(), 2)] == [none, failed]


def test_an_exporter_gets_every_finished_span(clock):
    exported: list[Span] = []
    tracer = Tracer(TraceStore(10, clock), clock, exported.append)
    trace = request_trace(tracer, clock, "echo", "ok")
    assert [s.kind for s in exported] == ["route", "attempt", "invoke"]
    assert {s.trace_id for s in exported} == {trace.trace_id}


def test_otlp_export_without_the_extra_is_a_configuration_error_naming_it(monkeypatch, clock):
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(InvalidRequest, match=r"agent-reach\[otel\]"):
        OtlpExport("http://127.0.0.1:4318", clock, service_name="agent-reach", node_id="n")


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [
        ("http://collector:4318", "http://collector:4318/v1/traces"),
        ("http://collector:4318/", "http://collector:4318/v1/traces"),
        ("http://collector:4318/v1/traces", "http://collector:4318/v1/traces"),
    ],
)
def test_the_otlp_endpoint_is_a_base_url(endpoint, url):
    assert traces_url(endpoint) == url


def decision(agent_id: str, *others: str) -> RouteDecision:
    candidates = [Candidate("echo", a, 0.5, {"health": 1.0}) for a in (agent_id, *others)]
    return RouteDecision("echo", agent_id, "best", candidates, None, "v1", {"health": 1.0})


def test_recent_decisions_are_kept_newest_first_even_when_the_log_is_off(clock):
    log = DecisionLog("off", clock, recent=3)
    for n in range(4):
        log.record(decision(f"a-{n}", "spare"), kind="invoke", request_id=f"r{n}", trace_id=f"t{n}")
    assert [d.request_id for d in log.recent(10)] == ["r3", "r2", "r1"]
    assert [d.request_id for d in log.recent(1)] == ["r3"]
    assert [d.request_id for d in log.recent(10, trace_id="t2")] == ["r2"]
    assert [d.request_id for d in log.recent(10, agent_id="a-1")] == ["r1"]
    assert len(log.recent(10, agent_id="spare")) == 3


METRICS = """\
agent_reach_requests_total{{capability="echo",status="ok"}} {ok}
agent_reach_requests_total{{capability="echo",status="error"}} {errors}
agent_reach_request_seconds_bucket{{capability="echo",le="0.01"}} {fast}
agent_reach_request_seconds_bucket{{capability="echo",le="0.1"}} {total}
agent_reach_request_seconds_bucket{{capability="echo",le="+Inf"}} {total}
agent_reach_request_seconds_count{{capability="echo"}} {total}
agent_reach_request_seconds_sum{{capability="echo"}} 1.0
"""


def test_traffic_is_the_growth_between_two_scrapes():
    before = parse_scrape(METRICS.format(ok=10, errors=0, fast=10, total=10), at_s=100.0)
    after = parse_scrape(METRICS.format(ok=28, errors=2, fast=20, total=30), at_s=102.0)
    [echo] = traffic(before, after)
    assert (echo.capability, echo.total, echo.errors) == ("echo", 30, 2)
    assert echo.requests_per_s == pytest.approx(10.0)
    assert echo.errors_per_s == pytest.approx(1.0)
    assert echo.p50_ms == pytest.approx(10.0)  # 10 of the 20 new requests took <= 10 ms
    assert echo.p99_ms == pytest.approx(10 + 90 * (19.8 - 10) / 10)


def test_quantiles_interpolate_inside_buckets_like_prometheus():
    buckets = [(0.1, 50.0), (0.2, 100.0), (float("inf"), 100.0)]
    assert quantile(0.5, buckets) == pytest.approx(0.1)
    assert quantile(0.75, buckets) == pytest.approx(0.15)
    assert quantile(0.5, [(0.1, 0.0), (float("inf"), 0.0)]) is None
    assert quantile(0.99, [(0.1, 0.0), (float("inf"), 5.0)]) == pytest.approx(0.1)
