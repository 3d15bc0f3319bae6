"""Fleet-wide load on Redis: two coordinators, a slow instance, traffic diverted.

Coordinator A holds three requests at the slow instance (its answers wait behind a gate
until B's traffic has gone: a fixed 2.5 s hold failed when the setup took longer);
coordinator B, which holds none, must see them (published every 200 ms through Redis)
and send its own traffic to the other instance, although the slow one weighs more.
Counted at the agents.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_until

POLICY = "[admission]\nmax_queue = 2\n"


def registration(agent_id: str, endpoint: str, weight: float) -> dict[str, object]:
    return {
        "id": agent_id,
        "capabilities": ["order.check"],
        "transport": {"endpoint": endpoint},
        "timeout_class": "reasoning",
        "weight": weight,
    }


def test_a_second_coordinator_diverts_from_an_instance_the_first_one_loads(
    redis_url: str, redis_prefix: str, tmp_path: Path, fake_agents, gated_agents
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    settings = Settings(
        decision_log="off",
        registry_backend="redis",
        redis_url=redis_url,
        redis_prefix=redis_prefix,
        policy_file=policy,
    )
    slow, slow_endpoint = gated_agents(name="slow")  # holds A's requests (`reasoning`: 5 s)
    fast, fast_endpoint = fake_agents(name="fast")
    with (
        run_coordinator(settings) as (url_a, _),
        run_coordinator(settings.model_copy()) as (url_b, _),
        httpx.Client(base_url=url_a, timeout=10) as a,
        httpx.Client(base_url=url_b, timeout=10) as b,
        ThreadPoolExecutor(3) as pool,
    ):
        assert a.post("/v1/agents", json=registration("slow-1", slow_endpoint, 2.0)).is_success
        held = [
            pool.submit(a.post, "/v1/invoke", json={"capability": "order.check"}) for _ in range(3)
        ]
        wait_until(lambda: len(slow.received) == 3, "A's three requests to reach the slow agent")
        assert a.post("/v1/agents", json=registration("fast-1", fast_endpoint, 1.0)).is_success
        wait_until(
            lambda: b.get("/v1/agents/slow-1").json()["stats"]["fleet_in_flight"] == 3,
            "coordinator B to see A's load on the slow instance",
        )
        wait_until(lambda: b.get("/v1/agents/fast-1").status_code == 200, "B to see fast-1")

        answers = [b.post("/v1/invoke", json={"capability": "order.check"}) for _ in range(5)]

        slow.gate.set()
        assert all(f.result().status_code == 200 for f in held)
    assert [r.json()["agent_id"] for r in answers] == ["fast-1"] * 5
    assert (len(slow.received), len(fast.received)) == (3, 5)
    decision = answers[0].json()["route"]
    slow_score = next(c["score"] for c in decision["candidates"] if c["agent_id"] == "slow-1")
    assert slow_score < decision["candidates"][0]["score"]
