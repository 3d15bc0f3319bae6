"""R2 frozen instance: SIGSTOP one of three for 5 s under load (TCP accepted, nothing answers).

Judged from the answers' attempts (each happened between its request's sending and
its final answer, client clock) and the coordinator's health log events:
- no first attempt reaches it after its 5th failed attempt (ordered by when they ended);
- nothing is routed to it while it is marked offline, and it serves nothing again
  until a `healthy` mark whose source is a probe.
Routing is by best score, so one or two timeouts usually stop its traffic before any
state change; whether it reaches `offline` within the pause depends on the probes
(reported). The load runs on until a probe's readmission is seen (bounded by the
longest ejection pause plus a margin: the pause doubles with each failed re-probe),
then AFTER_S more.
Whether it wins first attempts again after readmission is up to its
score (its call window still holds the timeouts): reported, not gated. Timed-out
deliveries are not re-sent (the `query` class), so the frozen agent's late
executions after SIGCONT are not duplicates.
"""

from __future__ import annotations

import contextlib
import math

from agent_reach.registry.health import EJECTION_MAX_S
from agent_reach.testing.agent_process import HealthMark
from agent_reach.testing.load import Load, LoadRun, check
from agent_reach.testing.waiting import WaitTimedOut, wait_until

POLICY = """
[timeout_classes.query]
timeout_s = 0.25
"""  # a per-try timeout of 250 ms
RATE = 100
PAUSE_AT_S, PAUSED_S, AFTER_S = 1.5, 5.0, 2.0  # AFTER_S: load after the readmission
READMIT_WITHIN_S = EJECTION_MAX_S + 5.0  # the longest pause before a re-probe, plus margin
DEADLINE_S = 1.0
TTL_S = 15.0  # longer than the pause: the lease must not be what takes it out


def test_a_frozen_instance_loses_its_traffic_and_regains_it_only_after_a_probe(
    rig, backend, report, tier
):
    coordinator = rig.coordinator(policy=POLICY, **backend)
    agents = [
        rig.agent(f"frozen-{i}", "frozen.act", coordinator.url, latency_ms=(2, 8), ttl_s=TTL_S)
        for i in range(3)
    ]
    rig.start(*agents)
    rig.wait_healthy(coordinator.url, [a.agent_id for a in agents])
    frozen = agents[0]
    duration_s = PAUSE_AT_S + PAUSED_S + READMIT_WITHIN_S + AFTER_S  # stopped sooner
    rate = RATE // 2 if tier == "small" else RATE  # small: on the Redis Cluster
    load = Load((coordinator.url,), "frozen.act", rate, duration_s, DEADLINE_S)
    run = LoadRun(load).start()
    timetable = rig.timetable()
    timetable.at(PAUSE_AT_S)
    frozen.pause()
    paused = run.history.mark("paused", agent_id=frozen.agent_id)
    timetable.at(PAUSE_AT_S + PAUSED_S)
    resumed = run.history.mark("resumed", agent_id=frozen.agent_id)  # before: a probe may be
    frozen.resume()  # waiting in its socket and answer at once
    with contextlib.suppress(WaitTimedOut):  # judged below: `back` stays None
        wait_until(
            lambda: _readmission(coordinator.health_marks(), frozen.agent_id, resumed.t),
            "a healthy mark of the frozen instance after SIGCONT",
            READMIT_WITHIN_S,
        )
    timetable = rig.timetable()
    timetable.at(AFTER_S)
    run.stop()
    history = run.join()

    marks = coordinator.health_marks()
    own = [m for m in marks if m.agent_id == frozen.agent_id and m.t > paused.t]
    back = _readmission(own, frozen.agent_id, resumed.t)
    back_t = back.t if back else math.inf
    offline = next((m for m in own if m.state == "offline"), None)
    worst = offline or next((m for m in own if m.state == "suspect" and m.t < back_t), None)
    to_frozen = [
        (record, attempt)
        for record in history.records
        for attempt in record.attempts
        if attempt.agent_id == frozen.agent_id
        and record.complete_t
        and record.complete_t > paused.t
    ]
    failed_t = sorted(r.complete_t for r, a in to_frozen if a.outcome != "ok")
    cutoff_t = failed_t[4] if len(failed_t) >= 5 else math.inf
    # An attempt happened between its request's sending and final answer (client clock).
    first = [r for r, a in to_frozen if a.number == 1 and r.complete_t < back_t]
    after_fifth_failure = [r for r in first if r.invoke_t > cutoff_t]
    # Sent after the pause: one sent before may have been answered by the agent before
    # SIGSTOP and reached the client after the mark (the coordinator's own time between).
    ok_before_probe = [
        r
        for r, a in to_frozen
        if a.outcome == "ok" and r.invoke_t > paused.t and r.complete_t < back_t
    ]
    readmitted = [r for r, a in to_frozen if a.number == 1 and r.invoke_t > back_t]
    result = report(
        check(
            f"frozen_instance-{backend['backend']}",
            load,
            history,
            rig.ledger(),
            marks=marks,
            config={"backend": backend["backend"], "policy": POLICY},
            figures={
                "failed_attempts_at_frozen": len(failed_t),
                "last_first_attempt_after_ms": _ms(
                    max((r.invoke_t for r in first if r.invoke_t > paused.t), default=paused.t)
                    - paused.t
                ),
                "worst_state": worst.state if worst else "healthy",
                "time_to_eject_ms": _ms(offline.t - paused.t) if offline else None,
                "readmitted_by": back.source if back else None,
                "time_to_readmit_ms": _ms(back.t - resumed.t) if back else None,
                "first_attempts_after_readmission": len(readmitted),
            },
        )
    )
    assert not after_fifth_failure, "first attempts kept coming after 5 failed attempts"
    assert result.dispatched_while_offline == 0
    assert back is not None and back.source == "probe"
    assert not ok_before_probe, "it served requests before a probe readmitted it"
    assert rig.statuses(coordinator.url)[frozen.agent_id] == "healthy"  # routable again
    assert result.lost == 0, result.lost_ids
    assert result.duplicate_executions == 0, result.duplicate_ids


def _readmission(marks: list[HealthMark], agent_id: str, after_t: float) -> HealthMark | None:
    """The first `healthy` mark of `agent_id` after `after_t`, whatever its source."""
    return next(
        (m for m in marks if m.agent_id == agent_id and m.state == "healthy" and m.t > after_t),
        None,
    )


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)
