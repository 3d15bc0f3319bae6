"""A coordinator started with the original deployment's `AR_ROUTE_AFFINITY_DEFAULT`."""

from __future__ import annotations

import httpx
import pytest

from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_until


def test_load_does_not_steer_a_decision_when_only_capability_health_context_are_on(
    settings: Settings, fake_agents
) -> None:
    on = settings.model_copy(update={"route_affinity_default": ["capability", "health", "context"]})
    _, endpoint = fake_agents()
    with run_coordinator(on) as (url, _), httpx.Client(base_url=url, timeout=10) as http:
        body = {"id": "a-1", "capabilities": ["echo"], "transport": {"endpoint": endpoint}}
        assert http.post("/v1/agents", json=body).status_code == 201
        wait_until(  # health 1 only once its first probe answered (unknown scores a tenth)
            lambda: http.get("/v1/agents/a-1").json()["status"] == "healthy",
            "the registration probe to answer",
        )
        decision = http.post("/v1/route", json={"capability": "echo"}).json()
        assert decision["weights"] == {"match": 0.30, "health": 0.25, "affinity": 0.20}
        candidate = decision["candidates"][0]
        # (match 1 × 0.30 + health 1 × 0.25 + no context yet) / the weights' total 0.75
        assert candidate["score"] == pytest.approx(0.55 / 0.75, abs=1e-6)
        assert http.get("/v1/policy").json()["policy"]["weights"] == decision["weights"]


def test_a_policy_put_without_weights_gets_the_same_factor_defaults_as_the_file(
    settings: Settings, fake_agents
) -> None:
    on = settings.model_copy(update={"route_affinity_default": ["capability", "health", "context"]})
    _, endpoint = fake_agents()
    with run_coordinator(on) as (url, _), httpx.Client(base_url=url, timeout=10) as http:
        body = {"id": "a-1", "capabilities": ["echo"], "transport": {"endpoint": endpoint}}
        assert http.post("/v1/agents", json=body).status_code == 201
        put = http.put("/v1/policy", json={"margin": 0.2})
        assert put.status_code == 200, put.text
        in_force = http.get("/v1/policy").json()["policy"]
        assert in_force["margin"] == 0.2
        assert in_force["weights"] == {"match": 0.30, "health": 0.25, "affinity": 0.20}
        decision = http.post("/v1/route", json={"capability": "echo"}).json()
        assert decision["weights"] == in_force["weights"]
        # the dispatch preset without weights: only its factors that are on (no affinity in it)
        put = http.put("/v1/policy", json={"preset": "dispatch"})
        assert put.status_code == 200, put.text
        assert http.get("/v1/policy").json()["policy"]["weights"] == {"match": 0.40, "health": 0.30}
        # weights given are used as written, the unnamed factors weighing 0
        put = http.put("/v1/policy", json={"weights": {"load": 0.5}})
        assert put.status_code == 200, put.text
        assert http.get("/v1/policy").json()["policy"]["weights"] == {"load": 0.5}
