"""Leases end routing at once; Redis-backed coordinators share one registry that outlives them."""

from __future__ import annotations

import httpx

from agent_reach.clock import ManualClock
from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_until


def body(agent_id: str, endpoint: str, ttl: float = 60) -> dict:
    return {
        "id": agent_id,
        "capabilities": ["echo"],
        "ttl": ttl,
        "transport": {"type": "http", "endpoint": endpoint},
    }


def test_memory_lease_expiry_takes_the_instance_out_without_a_sweep(fake_agents):
    clock = ManualClock()
    _, endpoint = fake_agents()
    with (
        run_coordinator(Settings(decision_log="off"), clock) as (url, _),
        httpx.Client(base_url=url) as http,
    ):
        http.post("/v1/agents", json=body("a-1", endpoint, ttl=5))
        assert http.post("/v1/invoke", json={"capability": "echo"}).status_code == 200
        clock.advance(5.001)
        response = http.post("/v1/invoke", json={"capability": "echo", "suspend": False})
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "no_instance"
        assert http.get("/v1/agents").json()["agents"][0]["status"] == "offline"


def test_redis_lease_is_redis_expiry(redis_url, redis_prefix, fake_agents):
    _, endpoint = fake_agents()
    settings = Settings(
        decision_log="off", registry_backend="redis", redis_url=redis_url, redis_prefix=redis_prefix
    )
    with run_coordinator(settings) as (url, _), httpx.Client(base_url=url) as http:
        http.post("/v1/agents", json=body("a-1", endpoint, ttl=1))
        wait_until(
            lambda: (
                http.post("/v1/invoke", json={"capability": "echo", "suspend": False}).status_code
                == 503
            ),
            "the 1 s lease to run out",
        )
        assert http.post("/v1/agents/a-1/heartbeat").status_code == 404


def test_two_redis_coordinators_share_the_registry(redis_url, redis_prefix, fake_agents):
    agent, endpoint = fake_agents()
    settings = Settings(
        decision_log="off", registry_backend="redis", redis_url=redis_url, redis_prefix=redis_prefix
    )
    with (
        run_coordinator(settings) as (url_a, _),
        run_coordinator(settings) as (url_b, _),
        httpx.Client(base_url=url_a) as a,
        httpx.Client(base_url=url_b) as b,
    ):
        assert a.post("/v1/agents", json=body("shared-1", endpoint)).status_code == 201
        wait_until(
            lambda: b.post("/v1/invoke", json={"capability": "echo"}).status_code == 200,
            "coordinator B to see the registration made on A",
        )
        assert b.post("/v1/agents/shared-1/heartbeat").status_code == 200
        assert b.delete("/v1/agents/shared-1").status_code == 204
        wait_until(
            lambda: a.post("/v1/invoke", json={"capability": "echo"}).status_code == 404,
            "coordinator A to see the deregistration made on B",
        )
    assert len(agent.received) >= 1


def test_the_redis_registry_survives_a_coordinator_restart(redis_url, redis_prefix, fake_agents):
    _, endpoint = fake_agents()
    settings = Settings(
        decision_log="off", registry_backend="redis", redis_url=redis_url, redis_prefix=redis_prefix
    )
    with run_coordinator(settings) as (url, _):
        httpx.post(f"{url}/v1/agents", json=body("durable-1", endpoint))
    with run_coordinator(settings) as (url, _):
        response = httpx.post(f"{url}/v1/invoke", json={"capability": "echo"})
        assert response.status_code == 200
        assert response.json()["agent_id"] == "durable-1"


def test_timeout_class_bounds_the_delivery(tmp_path, fake_agents):
    policy = tmp_path / "policy.toml"
    policy.write_text("[timeout_classes.quick]\ntimeout_s = 0.2\n", encoding="utf-8")
    _, endpoint = fake_agents(delay_s=2.0)
    with (
        run_coordinator(Settings(decision_log="off", policy_file=policy)) as (url, _),
        httpx.Client(base_url=url) as http,
    ):
        http.post("/v1/agents", json={**body("slow-1", endpoint), "timeout_class": "quick"})
        response = http.post("/v1/invoke", json={"capability": "echo"})
        assert response.status_code == 504
        error = response.json()["error"]
        assert error["code"] == "agent_timeout"
        assert error["outcome_unknown"] is True
