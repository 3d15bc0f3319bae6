"""R1 kill churn: one of three instances SIGKILLed every 2 s and restarted 1 s later, under load.

"Sent to an instance after it was marked offline" is judged from the coordinator's
own records: its `instance_marked_offline` / `instance_marked_healthy` log events
give each instance's offline periods, and every answer lists the instances its
attempts went to. A request sent after an offline mark and answered before the next
healthy mark (client clock, same machine) had all its attempts inside that period,
so an attempt of it to that instance is a violation (`load.dispatched_while_offline`).
"""

from __future__ import annotations

import math
import random

import pytest

from agent_reach.testing.load import History, Load, LoadRun, check

POLICY = """
[timeout_classes.query]
timeout_s = 1.0
"""
# (req/s, seconds): the smoke size is 100 req/s (10 s keeps the folder in budget);
# full is 60 s, at the smoke rate since no step test calibrates this machine.
SIZES = {"smoke": (100, 10.0), "full": (100, 60.0)}
KILL_EVERY_S, DOWN_S = 2.0, 1.0
DEADLINE_S = 2.0
SETTLE_S = 15.0  # while restarted instances wait for their probe, requests may be suspended
SEED = 4
MIN_SUCCESS_PCT = 95.0  # a floor against a broken fallback; each failure is explained below


@pytest.mark.cluster_smoke
def test_kill_churn_loses_nothing_and_executes_each_request_once(rig, backend, report, tier):
    rate, duration_s = SIZES[tier]
    coordinator = rig.coordinator(policy=POLICY, **backend)
    agents = [
        rig.agent(f"churn-{i}", "churn.act", coordinator.url, latency_ms=(2, 8)) for i in range(3)
    ]
    rig.start(*agents)
    rig.wait_healthy(coordinator.url, [a.agent_id for a in agents])
    load = Load((coordinator.url,), "churn.act", rate, duration_s, DEADLINE_S, settle_s=SETTLE_S)
    run = LoadRun(load).start()
    choose = random.Random(SEED).choice
    timetable = rig.timetable()
    for step in range(1, int(duration_s / KILL_EVERY_S)):
        timetable.at(step * KILL_EVERY_S)
        victim = choose(agents)
        run.history.mark("killing", agent_id=victim.agent_id)  # an answer may beat "killed"
        victim.kill()
        run.history.mark("killed", agent_id=victim.agent_id)
        timetable.at(step * KILL_EVERY_S + DOWN_S)
        run.history.mark("restarting", agent_id=victim.agent_id)
        victim.start()  # blocks until it serves: the next kill never leaves fewer than two up
        run.history.mark("restarted", agent_id=victim.agent_id)
    history = run.join()

    marks = coordinator.health_marks()
    result = report(
        check(
            f"kill_churn-{backend['backend']}",
            load,
            history,
            rig.ledger(),
            marks=marks,
            config={"backend": backend["backend"], "policy": POLICY, "seed": SEED},
            figures={
                "kills": len(history.named("killed")),
                "ejections": sum(m.state == "offline" for m in marks),
            },
        )
    )
    assert result.lost == 0, result.lost_ids
    assert result.duplicate_executions == 0, result.duplicate_ids
    # The only failures allowed: requests sent to a killed instance while it was down
    # (never re-sent: it may have acted). How many those are is the machine's (rate x
    # latency around each kill: 2 on a quiet machine, 17 with a p99 of 800 ms), so each
    # one is checked instead of their share.
    assert unexplained_failures(history) == [], result.codes
    assert result.success_pct >= MIN_SUCCESS_PCT, result.codes
    assert result.dispatched_while_offline == 0


def unexplained_failures(history: History) -> list[str]:
    """Failed requests no kill explains: none of their attempts went to an instance that
    was down (from the SIGKILL to its restart) at some time between their send and answer.

    A request sent just after a kill fails the same way as one in flight at it: the
    coordinator has not noticed yet, and a send over the dead connection may have
    reached the agent, so it is not re-sent either. A suspended request (202) is in
    flight until its task ends: a replay a kill cut short ends it with that failure.
    """
    restarted = [(e.t, e.fields["agent_id"]) for e in history.named("restarted")]
    down = [
        (t, next((r for r, a in restarted if a == agent and r >= t), math.inf), agent)
        for t, agent in ((e.t, e.fields["agent_id"]) for e in history.named("killing"))
    ]
    return [
        r.request_id
        for r in history.records
        if not r.is_success
        and not any(
            r.invoke_t <= up
            and start <= (r.complete_t or r.answer_t or math.inf)
            and any(a.agent_id == agent for a in r.attempts)
            for start, up, agent in down
        )
    ]
