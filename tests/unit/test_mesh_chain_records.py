"""What records keep of a delegation chain, and who sees them: spans and the trace store
(an agent from its own hop down), the decision log, and reported costs read off answers."""

from __future__ import annotations

import pytest

from agent_reach.clock import ManualClock
from agent_reach.invoke.transports.http import _reported_cost
from agent_reach.model.decisions import RouteDecision
from agent_reach.model.keys import Chain, Link, Principal
from agent_reach.observability.decision_log import DecisionLog
from agent_reach.observability.trace_store import TraceFilter, TraceStore
from agent_reach.observability.tracecontext import TraceContext
from agent_reach.observability.tracing import Tracer

TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER = Principal("k-1", "shop-frontend", None, "caller", ("cs.*", "order.*", "geo.*"))


def chain(*links: tuple[str, str, str]) -> Chain:
    return Chain(
        caller=CALLER,
        links=tuple(Link(p, None, "agent", i, c) for p, i, c in links),
        root="req-root",
        scope=(),
        context_id=None,
        hop=4,
        budget=None,
        expires_at=1e12,
    )


CS = ("cs-agents", "cs-bot", "cs.answer")
ORDERS = ("order-agents", "order-1", "order.track")


@pytest.fixture
def tracer() -> Tracer:
    clock = ManualClock()
    return Tracer(TraceStore(100, clock), clock)


def record_chain(tracer: Tracer) -> None:
    """caller -> cs-bot; cs-bot's token -> order-1; order-1's token -> geo (each an
    invoke span under the attempt that delivered to the agent that made the call)."""
    trace = TraceContext(TRACE)
    root = tracer.start("invoke", trace, "cs.answer", "req-root", principal="shop-frontend")
    parent = root.span_id
    for capability, request_id, held in (
        ("order.track", "req-2", chain(CS)),
        ("geo.locate", "req-3", chain(CS, ORDERS)),
    ):
        attempt = tracer.start("attempt", trace.under(parent), capability)
        tracer.end(attempt)
        span = tracer.start(
            "invoke",
            trace.under(attempt.span_id),
            capability,
            request_id,
            principal="shop-frontend",
            chain=held,
        )
        tracer.end(span)
        parent = span.span_id
    tracer.end(root)


def test_a_delegated_invoke_span_says_on_whose_behalf_and_through_whom(tracer: Tracer) -> None:
    record_chain(tracer)
    whole = tracer.store.get(TRACE, "shop-frontend")
    assert whole is not None
    delegated = {s["note"]: s for s in whole["spans"] if s["kind"] == "invoke"}
    assert "on_behalf_of" not in delegated["req-root"]  # the caller's own request
    assert (delegated["req-2"]["on_behalf_of"], delegated["req-2"]["via"]) == (
        "shop-frontend",
        ["cs-bot"],
    )
    assert delegated["req-3"]["via"] == ["cs-bot", "order-1"]
    assert len(whole["spans"]) == 5  # the caller sees the whole chain


def test_an_agent_sees_the_trace_from_its_own_hop_down(tracer: Tracer) -> None:
    record_chain(tracer)
    spans = {
        who: {s["note"] for s in view["spans"] if s["kind"] == "invoke"}
        for who in ("cs-agents", "order-agents")
        if (view := tracer.store.get(TRACE, who)) is not None
    }
    assert spans == {"cs-agents": {"req-2", "req-3"}, "order-agents": {"req-3"}}
    assert tracer.store.get(TRACE, "someone-else") is None
    listed = tracer.store.recent(TraceFilter(owner="order-agents"), 10)
    assert [t.trace_id for t in listed] == [TRACE]


def test_a_delegated_decision_names_its_chain_and_its_agents_see_it() -> None:
    log = DecisionLog("off", ManualClock())
    via = [{"agent": "cs-agents", "instance": "cs-bot", "capability": "cs.answer"}]
    log.note_delegation("req-2", {"on_behalf_of": "shop-frontend", "via": via, "by": "cs-agents"})
    for request_id in ("req-root", "req-2"):
        log.record(
            RouteDecision("x", "a", "exact", [], None, "v1", {}),
            kind="invoke",
            request_id=request_id,
            trace_id=TRACE,
            principal="shop-frontend",
        )
    mine = log.recent(10, principal="shop-frontend")
    assert [(d.request_id, d.delegation is not None) for d in mine] == [
        ("req-2", True),
        ("req-root", False),
    ]
    assert [d.request_id for d in log.recent(10, principal="cs-agents")] == ["req-2"]
    assert log.recent(10, principal="order-agents") == []


@pytest.mark.parametrize(
    ("header", "cost"),
    [
        (b"6", 6.0),
        (b" 0.25 ", 0.25),
        (b"0", 0.0),
        (b"-3", None),  # a negative cost would earn budget back
        (b"nan", None),
        (b"inf", None),
        (b"six", None),
        (b"", None),
    ],
)
def test_a_reported_cost_is_a_finite_number_not_below_zero(
    header: bytes, cost: float | None
) -> None:
    assert _reported_cost(header) == cost
