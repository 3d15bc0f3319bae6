"""Ping-pong: two agents that forward every request to each other, through the coordinator.

The hop budget (5) must stop each bounce after at most 5 deliveries, dead-letter it
once, and never multiply it: one attempt per hop, no retry (the original incident
was 300 bounces in 20 s). Deliveries are counted per trace in the agents' ledgers,
since every hop carries the trace of the request that started it.
"""

from __future__ import annotations

from collections import Counter

import httpx

from agent_reach.model.invocations import DEFAULT_MAX_HOP
from agent_reach.testing.load import Load, LoadRun, check

POLICY = """
[timeout_classes.query]
timeout_s = 2.0
"""
RATE, DURATION_S = 10, 2.0
DEADLINE_S = 5.0


def test_ping_pong_stops_at_the_hop_limit_and_is_dead_lettered_once(rig, backend, report):
    coordinator = rig.coordinator(policy=POLICY, **backend)
    ping = rig.agent("ping-1", "ping", coordinator.url, forward_to="pong")
    pong = rig.agent("pong-1", "pong", coordinator.url, forward_to="ping")
    rig.start(ping, pong)
    rig.wait_healthy(coordinator.url, [ping.agent_id, pong.agent_id])
    load = Load((coordinator.url,), "ping", RATE, DURATION_S, DEADLINE_S)
    history = LoadRun(load).start().join()

    ledger = rig.ledger()
    trace_of = {row.request_id: row.trace_id for row in ledger if row.kind == "executed"}
    hops = Counter(row.trace_id for row in ledger if row.kind == "executed")
    per_request = [hops[trace_of.get(r.request_id)] for r in history.records]
    letters = httpx.get(f"{coordinator.url}/v1/deadletters", params={"limit": 1000}).json()
    lettered = Counter(item["trace_id"] for item in letters["items"])
    result = report(
        check(
            f"ping_pong-{backend['backend']}",
            load,
            history,
            ledger,
            config={"backend": backend["backend"], "max_hop": DEFAULT_MAX_HOP},
            figures={
                "deliveries_per_request_max": max(per_request),
                "deliveries_total": sum(per_request),
                "dead_letters": letters["count"],
                "dedup_or_resent_deliveries": len(ledger) - sum(per_request),
            },
        )
    )
    assert max(per_request) <= DEFAULT_MAX_HOP
    assert {(r.status, r.code) for r in history.records} == {(508, "hop_limit")}
    assert [lettered[trace_of.get(r.request_id)] for r in history.records] == [1] * len(per_request)
    assert letters["count"] == len(history.records)
    assert result.amplification == 1.0  # one attempt per request at the edge: no retry
    assert len(ledger) == sum(per_request)  # and none further down: every delivery acted once
    assert result.lost == 0, result.lost_ids
