"""I4 two coordinators on one Redis, one SIGKILLed mid-request: every accepted request ends once.

On a standalone Redis and on the 6-node Cluster (both in the default suite).

Agents register and heartbeat with the survivor (B). Clients call A; a request that
gets no answer from A (or 409 `in_progress` while A's claim lives) is sent again with
the same request_id, to B. Synchronous requests: B takes A's claims over once A's
liveness record runs out (`AR_LIVENESS_TTL_S`, 2 s) and sends each again to the SDK agent
(it declares `idempotent`), which answers from its guard when it had already acted.
Tasks (asynchronous, `long` and suspended) accepted by A are taken over by B from the
durable queues once A's liveness ran out (or its entries are stale, `AR_TASK_STALE_S`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from agent_reach.invoke.idempotency import LEASE_GRACE_S
from agent_reach.testing.agent_process import CoordinatorProcess, LedgerRow
from agent_reach.testing.load import History, Load, LoadRun, check

# Short classes keep A's idempotency lease (longest class deadline + LEASE_GRACE_S) at 8 s.
POLICY = """
[timeout_classes.query]
timeout_s = 1.0

[timeout_classes.reasoning]
timeout_s = 1.0
retries = 1

[timeout_classes.long]
timeout_s = 3.0
asynchronous = true

[delivery]
backoff_s = [0.05]
suspend_s = 120.0
"""
LEASE_S = 3.0 + LEASE_GRACE_S
RATE = 40
KILL_AT_S = 2.5
DEADLINE_S = 2.0


STALE_S = 3.0  # entries of a dead coordinator are taken over after this (AR_TASK_STALE_S)
# A request sent to A as it is killed: A's claim is taken over once A's liveness runs out
# (AR_LIVENESS_TTL_S, 2 s, plus a beat), so its caller resends for the promised 5 s, not
# for one request deadline (2 s: on the Cluster an async request once got 409 in_progress
# from B at its end, twice in a row, before coordinator liveness).
TAKEOVER_S = 5.0


def _coordinators(rig: Any, store: dict[str, str]) -> tuple[CoordinatorProcess, CoordinatorProcess]:
    shared = {**store, "extra_env": {"AR_TASK_STALE_S": str(STALE_S)}}
    return rig.coordinator(policy=POLICY, **shared), rig.coordinator(policy=POLICY, **shared)


def _once(history: History, ledger: list[LedgerRow]) -> tuple[list[str], list[str]]:
    """Ids that did not end well, and ids executed other than once."""
    executed = Counter(row.request_id for row in ledger if row.kind == "executed")
    return (
        [r.request_id for r in history.records if not r.is_success],
        [r.request_id for r in history.records if executed[r.request_id] != 1],
    )


@pytest.mark.cluster_smoke  # on the Cluster in CI sizes too: ~15 s
def test_sync_requests_in_flight_on_a_killed_coordinator_end_exactly_once(rig, store, report):
    a, b = _coordinators(rig, store)
    agent = rig.agent("sync-1", "work.sync", b.url, latency_ms=(100, 300))
    rig.start(agent)
    rig.wait_healthy(a.url, [agent.agent_id])
    load = Load(
        (a.url, b.url),
        "work.sync",
        RATE,
        KILL_AT_S + 2.0,
        DEADLINE_S,
        failover_s=LEASE_S + 2 * DEADLINE_S,
    )
    run = LoadRun(load).start()
    rig.timetable().at(KILL_AT_S)
    a.kill()
    killed = run.history.mark("coordinator_killed", url=a.url)
    history = run.join()

    ledger = rig.ledger()
    not_ok, not_once = _once(history, ledger)
    failed_over = [r for r in history.records if r.tries > 1]
    # Sent to A before the kill, answered by B: in flight on A when it died.
    in_flight = [r for r in failed_over if r.invoke_t < killed.t and r.coordinator == b.url]
    result = report(
        check(
            f"two_coordinators_sync-{store['backend']}",
            load,
            history,
            ledger,
            config={"policy": POLICY, "lease_s": LEASE_S},
            figures={
                "in_flight_at_kill": len(in_flight),
                "failed_over": len(failed_over),
                "max_resolution_after_kill_s": round(
                    max((r.answer_t or 0.0) for r in failed_over) - killed.t, 2
                )
                if failed_over
                else None,
            },
        )
    )
    assert in_flight, "no request was in flight on the killed coordinator"
    assert not_ok == [] and not_once == []
    assert result.lost == 0 and result.duplicate_executions == 0


def test_tasks_accepted_by_a_killed_coordinator_are_taken_over_and_end_exactly_once(
    rig, store, report
):
    a, b = _coordinators(rig, store)
    worker = rig.agent("async-1", "work.async", b.url, latency_ms=(200, 400))
    # 0.5-1 s of work in a 3 s class: room for a loaded machine, still the slowest class
    slow = rig.agent("long-1", "work.long", b.url, latency_ms=(500, 1000), timeout_class="long")
    # Registered with a long lease, then killed: its capability is known and has no instance
    # that works, so requests for it are suspended until it is back.
    later = rig.agent("later-1", "work.later", b.url, ttl_s=300.0)
    rig.start(worker, slow, later)
    rig.wait_healthy(a.url, [worker.agent_id, slow.agent_id, later.agent_id])
    later.kill()
    settle_s = STALE_S + 20.0
    loads = [
        Load((a.url, b.url), "work.async", 10, KILL_AT_S, DEADLINE_S, {"mode": "async"},
             failover_s=TAKEOVER_S, settle_s=settle_s, id_prefix="async"),
        Load((a.url, b.url), "work.long", 5, KILL_AT_S, DEADLINE_S,
             failover_s=TAKEOVER_S, settle_s=settle_s, id_prefix="long"),
        Load((a.url, b.url), "work.later", 5, KILL_AT_S, DEADLINE_S,
             failover_s=TAKEOVER_S, settle_s=settle_s, id_prefix="later"),
    ]  # fmt: skip
    runs = [LoadRun(load).start() for load in loads]
    rig.timetable().at(KILL_AT_S)
    a.kill()
    for run in runs:
        killed = run.history.mark("coordinator_killed", url=a.url)
    rig.start(later)  # the suspended capability gets an instance only after A died
    for load, run in zip(loads, runs, strict=True):
        history = run.join()
        ledger = rig.ledger()
        not_ok, not_once = _once(history, ledger)
        result = report(
            check(
                f"two_coordinators_{load.id_prefix}-{store['backend']}",
                load,
                history,
                ledger,
                config={"policy": POLICY, "stale_s": STALE_S},
                figures={
                    "tasks": sum(r.task_id is not None for r in history.records),
                    "last_done_after_kill_s": round(
                        max(r.complete_t or 0.0 for r in history.records) - killed.t, 2
                    ),
                },
            )
        )
        assert not_ok == [] and not_once == [], load.id_prefix
        assert result.lost == 0 and result.duplicate_executions == 0
