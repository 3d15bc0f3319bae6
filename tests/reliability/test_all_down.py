"""R5 all instances down: every instance of the capability SIGKILLed for a while under load.

Requests meanwhile must fail fast or be suspended (202 and a task), none may hang;
once the instances are back, every suspended request completes, executed exactly once
(agents' ledgers). The outage is 5 s in CI (3 s at half the rate on the Redis Cluster) and 10 s with
AR_RELIABILITY_FULL=1.
"""

from __future__ import annotations

from collections import Counter

from agent_reach.testing.load import Load, LoadRun, check

POLICY = """
[timeout_classes.query]
timeout_s = 1.0

[delivery]
suspend_s = 120.0
"""  # suspended requests must outlive the outage and the restart (up to RESTART_S)
RATE = 50
DOWN_AT_S, AFTER_S = 2.0, 2.0
DOWN_S = {"small": 3.0, "smoke": 5.0, "full": 10.0}  # small: on the Cluster
DEADLINE_S = 2.0
# Suspended requests are polled this long once the instances are back. The load's
# window counts from its last arrival, so it also covers the restart, which the rig
# allows READY_TIMEOUT_S (60 s): three interpreters starting at once on a loaded 2-core
# host took 40 s, and a 30 s window from the last arrival ended before they were up.
SETTLE_S = 30.0
RESTART_S = 60.0


def test_requests_fail_fast_or_wait_suspended_and_complete_once(rig, backend, report, tier):
    down_s = DOWN_S[tier]
    rate = RATE // 2 if tier == "small" else RATE
    coordinator = rig.coordinator(policy=POLICY, **backend)
    agents = [
        rig.agent(f"down-{i}", "down.act", coordinator.url, latency_ms=(2, 8)) for i in range(3)
    ]
    rig.start(*agents)
    rig.wait_healthy(coordinator.url, [a.agent_id for a in agents])
    duration_s = DOWN_AT_S + down_s + AFTER_S
    load = Load(
        (coordinator.url,), "down.act", rate, duration_s, DEADLINE_S, settle_s=SETTLE_S + RESTART_S
    )
    run = LoadRun(load).start()
    timetable = rig.timetable()
    timetable.at(DOWN_AT_S)
    for agent in agents:
        agent.kill()
    killed = run.history.mark("all_killed")
    timetable.at(DOWN_AT_S + down_s)
    restarting = run.history.mark("restarting")
    rig.start(*agents)
    run.history.mark("restarted")
    history = run.join()

    ledger = rig.ledger()
    executed = Counter(row.request_id for row in ledger if row.kind == "executed")
    during = [r for r in history.records if killed.t < r.invoke_t < restarting.t]
    suspended = [r for r in history.records if r.task_id]
    result = report(
        check(
            f"all_down-{backend['backend']}",
            load,
            history,
            ledger,
            config={"backend": backend["backend"], "policy": POLICY, "down_s": down_s},
            figures={
                "requests_during_outage": len(during),
                "suspended": len(suspended),
                "failed_fast": sum(r.task_id is None for r in during),
                "max_answer_during_outage_ms": round(
                    max(r.latency_s or 0.0 for r in during) * 1000, 1
                ),
                "first_suspension_after_kill_ms": round(
                    (min(r.answer_t or 0.0 for r in suspended) - killed.t) * 1000, 1
                )
                if suspended
                else None,
                "suspended_completed_ok": sum(r.is_success for r in suspended),
                "last_suspended_done_after_restart_s": round(
                    max(r.complete_t or 0.0 for r in suspended) - restarting.t, 2
                )
                if suspended
                else None,
            },
        )
    )
    assert result.lost == 0, result.lost_ids  # every answer in its deadline + 1 s, every task done
    assert suspended, "no request was suspended during the outage"
    assert [r.request_id for r in suspended if not r.is_success] == []
    assert [r.request_id for r in suspended if executed[r.request_id] != 1] == []
    assert result.duplicate_executions == 0, result.duplicate_ids
