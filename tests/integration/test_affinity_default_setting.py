"""A coordinator started with the original deployment's `AR_ROUTE_AFFINITY_DEFAULT`."""

from __future__ import annotations

import httpx

from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator


def test_load_does_not_steer_a_decision_when_only_capability_health_context_are_on(
    settings: Settings, fake_agents
) -> None:
    on = settings.model_copy(update={"route_affinity_default": ["capability", "health", "context"]})
    _, endpoint = fake_agents()
    with run_coordinator(on) as (url, _), httpx.Client(base_url=url, timeout=10) as http:
        body = {"id": "a-1", "capabilities": ["echo"], "transport": {"endpoint": endpoint}}
        assert http.post("/v1/agents", json=body).status_code == 201
        decision = http.post("/v1/route", json={"capability": "echo"}).json()
        assert decision["weights"] == {"match": 0.30, "health": 0.25, "affinity": 0.20}
        candidate = decision["candidates"][0]
        assert candidate["score"] == 0.55  # match 1 × 0.30 + health 1 × 0.25, no context yet
        assert http.get("/v1/policy").json()["policy"]["weights"] == decision["weights"]
