"""`GET /v1/traffic`: what a real coordinator counted of real requests, both backends."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_until

ADMIN_KEY = "traffic-admin-key-0123456789"


def traffic(http: httpx.Client) -> dict[str, Any]:
    response = http.get("/v1/traffic")
    assert response.status_code == 200, response.text
    return response.json()


def test_requests_attempts_and_refusals_are_counted_where_they_happened(
    http, register, fake_agents
):
    _, ok_endpoint = fake_agents(delay_s=0.05)
    _, broken_endpoint = fake_agents(status=400)  # a final error: never re-sent
    assert register("echo-1", ok_endpoint, "echo").status_code == 201
    assert register("broken-1", broken_endpoint, "broken").status_code == 201

    for _ in range(3):
        assert http.post("/v1/invoke", json={"capability": "echo"}).status_code == 200
    for _ in range(2):
        assert http.post("/v1/invoke", json={"capability": "broken"}).status_code >= 400
    refused = http.post("/v1/invoke", json={"capability": "no.such.thing"})
    assert refused.json()["error"]["code"] == "no_capability"

    body = traffic(http)

    assert body["bucket_s"] == 5 and body["window_s"] == 900
    assert len(body["times"]) == 180 and body["times"][-1] <= body["now"]
    echo = body["capabilities"]["echo"]
    assert (sum(echo["requests"]), sum(echo["errors"]), sum(echo["refusals"])) == (3, 0, 0)
    broken = body["capabilities"]["broken"]
    assert (sum(broken["requests"]), sum(broken["errors"])) == (2, 2)
    unknown = body["capabilities"]["(unknown)"]
    assert (sum(unknown["requests"]), sum(unknown["refusals"])) == (1, 1)
    assert sum(body["total"]["requests"]) == 6
    # the agent waits 50 ms: every echo took at least that, and not ten times more
    p50 = [v for v in echo["p50_ms"] if v is not None]
    assert p50 and all(49 <= v < 500 for v in p50)
    assert sum(body["instances"]["echo-1"]["requests"]) == 3
    assert sum(body["instances"]["broken-1"]["errors"]) == 2
    assert "(unknown)" not in body["instances"]  # nothing was delivered for it
    by_instance = http.get("/v1/traffic", params={"by": "instance"}).json()
    assert "capabilities" not in by_instance
    assert sum(by_instance["instances"]["echo-1"]["requests"]) == 3
    wrong = http.get("/v1/traffic", params={"by": "agent"})
    assert wrong.status_code == 422
    assert wrong.json()["error"]["code"] == "validation_error"


def test_text_decisions_fill_the_confidence_histogram_with_the_policy_thresholds(
    http, register, fake_agents
):
    _, endpoint = fake_agents()
    register("track-1", endpoint, "order.track", description="where is my order, tracking")
    register("cancel-1", endpoint, "order.cancel", description="cancel my order, refund")

    for text in ("where is my order", "cancel my order please", "what is the weather"):
        assert http.post("/v1/route", json={"text": text}).status_code == 200

    routing = traffic(http)["routing"]

    assert sum(routing["confidence"]) == 3
    assert sum(routing["margin"]) == 3  # two capabilities matched each time
    assert len(routing["bins"]) == len(routing["confidence"]) == 20
    policy = http.get("/v1/policy").json()["policy"]
    assert routing["min_confidence"] == policy["min_confidence"]
    assert routing["margin_threshold"] == policy["margin"]


def test_a_request_refused_by_admission_is_counted_as_a_refusal(settings, gated_agents):
    agent, endpoint = gated_agents()
    with (
        run_coordinator(settings.model_copy(update={"max_in_flight": 1})) as (url, _),
        httpx.Client(base_url=url, timeout=10) as http,
        ThreadPoolExecutor(1) as pool,
    ):
        registration = {
            "id": "slow-1",
            "capabilities": ["echo"],
            "transport": {"endpoint": endpoint},
        }
        assert http.post("/v1/agents", json=registration).status_code == 201
        held = pool.submit(http.post, "/v1/invoke", json={"capability": "echo"})
        wait_until(lambda: len(agent.received) == 1, "the first request to reach the agent")

        refused = http.post("/v1/invoke", json={"capability": "echo"})

        agent.gate.set()
        assert held.result().status_code == 200
        assert refused.json()["error"]["code"] == "overloaded"
        echo = traffic(http)["capabilities"]["echo"]
    assert (sum(echo["requests"]), sum(echo["refusals"]), sum(echo["errors"])) == (2, 1, 0)


@pytest.fixture
def secured() -> Iterator[str]:
    settings = Settings(decision_log="off", auth="on", admin_key=SecretStr(ADMIN_KEY))
    with run_coordinator(settings) as (url, _):
        yield url


@pytest.mark.parametrize(("role", "status"), [("observer", 200), ("caller", 403)])
def test_only_observers_and_admins_read_the_series(secured: str, role: str, status: int):
    admin = {"authorization": f"Bearer {ADMIN_KEY}"}
    with httpx.Client(base_url=secured, timeout=10) as http:
        made = http.post("/v1/keys", json={"principal": "someone", "role": role}, headers=admin)
        assert made.status_code == 201, made.text
        key = made.json()["key"]
        assert http.get("/v1/traffic").status_code == 401
        answer = http.get("/v1/traffic", headers={"authorization": f"Bearer {key}"})
        assert answer.status_code == status, answer.text
