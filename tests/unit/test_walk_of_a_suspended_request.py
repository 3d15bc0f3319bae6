"""The walk of a suspended request (202 without decision or attempts) reads its trace.

`request_spans` picks the route and attempt spans of one request out of a trace that
may hold several; `walk` then says routed, each attempt, and why it waits, or, when no
instance could be tried, that nothing was attempted.
"""

from __future__ import annotations

from typing import Any

from agent_reach.model.keys import ANONYMOUS
from agent_reach.registry.history import InstanceSnapshot
from agent_reach.troubleshooting.journal import JournalEntry
from agent_reach.troubleshooting.walk import request_spans, walk
from agent_reach.wire.answer import Answer

TRACE = "4e0f23a6000a32fb90cc0f9b17bf4397"


class NoHistory:
    def at(self, agent_id: str, wall_time: float) -> InstanceSnapshot | None:
        return None


def span(span_id: str, parent: str | None, kind: str, **fields: Any) -> dict[str, Any]:
    base = {"agent_id": None, "attempt": 0, "note": None, "status": "ok", "duration_ms": 0.5}
    return {"span_id": span_id, "parent_id": parent, "kind": kind, "name": "order.track"} | (
        base | fields
    )


def suspended(request_id: str, instances: list[dict[str, Any]]) -> JournalEntry:
    body = {
        "task_id": request_id,
        "request_id": request_id,
        "trace_id": TRACE,
        "status": "suspended",
        "created_at": 1000.0,
        "updated_at": 1000.0,
        "suspended_until": 1120.0,
        "instances": instances,
    }
    return JournalEntry(request_id, "anonymous", TRACE, 1000.0, 1.2, None, Answer.of(202, body))


TRACE_DOCUMENT = {
    "trace_id": TRACE,
    "spans": [
        span("a", None, "invoke", note="req-1", status="suspended"),
        span("b", "a", "route", agent_id="logistics-01", note="exact"),
        span("c", "a", "attempt", agent_id="logistics-01", attempt=1, status="agent_unreachable"),
        span("d", None, "invoke", note="req-2"),  # another request of the same trace
        span("e", "d", "route", agent_id="order-01", note="exact"),
    ],
}


def test_request_spans_are_the_route_and_attempts_under_the_request_s_invoke() -> None:
    assert [s["span_id"] for s in request_spans(TRACE_DOCUMENT, "req-1")] == ["b", "c"]
    assert [s["span_id"] for s in request_spans(TRACE_DOCUMENT, "req-2")] == ["e"]
    assert request_spans(None, "req-1") == []


def test_a_suspended_request_is_routed_then_attempted_then_waits() -> None:
    why = [{"agent_id": "logistics-01", "status": "unknown", "last_error": "agent_unreachable"}]
    spans = request_spans(TRACE_DOCUMENT, "req-1")

    walked = walk(suspended("req-1", why), NoHistory(), ANONYMOUS, spans)

    routing, registry, _, delivery = walked["steps"]
    assert routing["verdict"] == "ok" and routing["decision"] is None
    assert routing["traced"] == {
        "capability": "order.track",
        "agent_id": "logistics-01",
        "rule": "exact",
    }
    assert [i["agent_id"] for i in registry["instances"]] == ["logistics-01"]
    # leased, but its only attempt found nothing answering: the registry step says so
    assert registry["verdict"] == "unreachable"
    assert registry["finding"].startswith("logistics-01 was leased but unreachable")
    assert walked["first_wrong_step"] == "registry"
    assert delivery["verdict"] == "failed"
    assert delivery["attempts"] == [
        {
            "number": 1,
            "agent_id": "logistics-01",
            "outcome": "agent_unreachable",
            "duration_ms": 0.5,
        }
    ]
    assert delivery["instances"] == why
    assert delivery["finding"] == (
        "1 attempt failed (logistics-01 agent_unreachable), so it was suspended: "
        "replayed once an instance answers its probe, for up to 120 s"
    )


def test_a_request_suspended_before_any_attempt_says_nothing_was_tried() -> None:
    spans = [span("b", "a", "route", agent_id="logistics-01", note="exact")]

    walked = walk(suspended("req-3", []), NoHistory(), ANONYMOUS, spans)

    delivery = walked["steps"][3]
    assert delivery["verdict"] == "failed" and delivery["attempts"] == []
    assert delivery["finding"].startswith("no instance could be tried, so it was suspended")


def test_without_its_trace_the_walk_says_what_it_cannot_know_and_blames_no_routing() -> None:
    walked = walk(suspended("req-4", []), NoHistory(), ANONYMOUS)

    routing, _, _, delivery = walked["steps"]
    assert routing["verdict"] == "ok"  # a task is made only after routing
    assert "not kept" in routing["finding"]
    assert walked["first_wrong_step"] == "delivery"
    assert delivery["finding"].startswith("suspended (its attempts are in its trace")
