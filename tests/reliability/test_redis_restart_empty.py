"""J2 Redis restarted empty while agents' next heartbeats are far off: no re-registration wait.

Agents hold 30 s leases, so they heartbeat every 10 s. Redis (no persistence) is stopped
for 1 s and comes back with no data. The coordinator's registry watch reconnects, finds
the store empty while its own index still holds live leases, and writes those records
back at once: requests succeed again within 2 s of Redis answering, well before any
agent's next heartbeat (which would otherwise get a 404 and re-register).
"""

from __future__ import annotations

import httpx
import pytest

from agent_reach.testing.load import Load, LoadRun, check
from agent_reach.testing.redis_server import RedisServer

POLICY = """
[timeout_classes.query]
timeout_s = 1.0
"""
RATE = 30
STOP_AT_S, DOWN_S, AFTER_S = 2.0, 1.0, 3.5
DEADLINE_S = 2.0
TTL_S = 30.0  # heartbeats every 10 s: far later than the recovery bound
RECOVERY_BOUND_S = 2.0


@pytest.mark.redis
def test_registrations_are_written_back_at_once_when_redis_returns_empty(rig, report):
    with RedisServer() as redis:
        coordinator = rig.coordinator(
            policy=POLICY, backend="redis", redis_url=redis.url, redis_prefix="empty"
        )
        agents = [
            rig.agent(f"empty-{i}", "empty.act", coordinator.url, latency_ms=(2, 8), ttl_s=TTL_S)
            for i in range(2)
        ]
        rig.start(*agents)
        rig.wait_healthy(coordinator.url, [a.agent_id for a in agents])
        load = Load((coordinator.url,), "empty.act", RATE, STOP_AT_S + DOWN_S + AFTER_S, DEADLINE_S)
        run = LoadRun(load).start()
        timetable = rig.timetable()
        timetable.at(STOP_AT_S)
        redis.stop()
        run.history.mark("redis_stopped")
        timetable.at(STOP_AT_S + DOWN_S)
        redis.start()
        back = run.history.mark("redis_answering")
        history = run.join()
        restored = coordinator.events("registry_restored")
        heartbeat = httpx.post(f"{coordinator.url}/v1/agents/{agents[0].agent_id}/heartbeat")

    failing_after = [r for r in history.records if r.invoke_t > back.t and not r.is_success]
    recovery_s = max((r.invoke_t - back.t for r in failing_after), default=0.0)
    result = report(
        check(
            "redis_restart_empty-redis",
            load,
            history,
            rig.ledger(),
            config={"policy": POLICY, "down_s": DOWN_S, "agent_ttl_s": TTL_S},
            figures={
                "failures_after_return": len(failing_after),
                "recovery_s": round(recovery_s, 3),
            },
        )
    )
    assert recovery_s <= RECOVERY_BOUND_S, [(r.request_id, r.code) for r in failing_after]
    assert heartbeat.status_code == 200, heartbeat.text  # its record is back: no 404
    assert restored and restored[0]["instances"] == len(agents)
    assert result.duplicate_executions == 0, result.duplicate_ids
