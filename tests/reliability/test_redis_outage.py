"""J1 (smoke) Redis stopped and restarted under load: fail fast, then heal without help.

A private redis-server, stopped for 3 s and started again on the same port. It has no
persistence, so it comes back empty: the coordinator's idempotency claims work at
once, and the agents register again at their next heartbeat (404 -> register).
Every request carries a request_id, so every one needs the store: while Redis is
down each must be answered 503 `store_unavailable` (none may hang), no request may
get a bare 500 (one in flight when Redis stops included), and within 2 s
of Redis answering again every request must succeed (issue 4's bound). "Down" lasts
from the stop until the new process is spawned; "back" starts once it answers PING.
"""

from __future__ import annotations

import pytest

from agent_reach.testing.load import NOT_JSON, Load, LoadRun, check
from agent_reach.testing.redis_server import RedisServer

POLICY = """
[timeout_classes.query]
timeout_s = 1.0
"""
RATE = 50
STOP_AT_S, DOWN_S, AFTER_S = 2.0, 3.0, 4.0
DEADLINE_S = 2.0
TTL_S = 3.0  # heartbeats every second: the registry is rebuilt within a second of Redis
RECOVERY_BOUND_S = 2.0  # issue 4: calls recover by themselves within 2 s of Redis returning


@pytest.mark.redis
def test_calls_fail_fast_while_redis_is_down_and_recover_when_it_returns(rig, report):
    with RedisServer() as redis:
        coordinator = rig.coordinator(
            policy=POLICY, backend="redis", redis_url=redis.url, redis_prefix="outage"
        )
        agents = [
            rig.agent(f"store-{i}", "store.act", coordinator.url, latency_ms=(2, 8), ttl_s=TTL_S)
            for i in range(3)
        ]
        rig.start(*agents)
        rig.wait_healthy(coordinator.url, [a.agent_id for a in agents])
        duration_s = STOP_AT_S + DOWN_S + AFTER_S
        load = Load((coordinator.url,), "store.act", RATE, duration_s, DEADLINE_S, settle_s=10.0)
        run = LoadRun(load).start()
        timetable = rig.timetable()
        timetable.at(STOP_AT_S)
        redis.stop()
        stopped = run.history.mark("redis_stopped")
        timetable.at(STOP_AT_S + DOWN_S)
        # Redis may answer before `start()` returns (it polls PING): "down" ends when the
        # new process is spawned, "back" begins once it has answered; an answer in that
        # gap belongs to neither.
        restarting = run.history.mark("redis_restarting")
        redis.start()
        back = run.history.mark("redis_answering")
        history = run.join()

    while_down = [
        r for r in history.records if stopped.t < r.invoke_t and (r.answer_t or 0) < restarting.t
    ]
    wrong = [r for r in while_down if (r.status, r.code) != (503, "store_unavailable")]
    failing_after = [r for r in history.records if r.invoke_t > back.t and not r.is_success]
    recovery_s = max((r.invoke_t - back.t for r in failing_after), default=0.0)
    result = report(
        check(
            "redis_outage-redis",
            load,
            history,
            rig.ledger(),
            config={"policy": POLICY, "down_s": DOWN_S, "agent_ttl_s": TTL_S},
            figures={
                "answered_while_down": len(while_down),
                "max_answer_while_down_ms": round(
                    max((r.latency_s or 0.0 for r in while_down), default=0.0) * 1000, 1
                ),
                "failures_after_return": len(failing_after),
                "recovery_s": round(recovery_s, 3),
            },
        )
    )
    assert while_down, "no request was answered while Redis was down"
    assert [(r.request_id, r.status, r.code) for r in wrong] == []
    bare = [(r.request_id, r.code) for r in history.records if r.code.startswith(NOT_JSON)]
    assert bare == [], "answers that are no error body (a traceback's bare 500)"
    assert result.lost == 0, result.lost_ids
    assert result.duplicate_executions == 0, result.duplicate_ids
    assert recovery_s <= RECOVERY_BOUND_S, [(r.request_id, r.code) for r in failing_after]
