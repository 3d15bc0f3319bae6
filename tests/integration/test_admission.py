"""Admission control against real agents: beyond the limits, an answer at once.

A gated FakeAgent holds the admitted requests until the refused one is answered (a fixed
1.2 s hold let a stall longer than that admit it); the tests count what reached the agent
and what `/metrics` says was shed — no timing is asserted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_reach.config import Settings
from agent_reach.server.app import CoordinatorApp, create_app
from agent_reach.testing.servers import ServerThread
from agent_reach.testing.waiting import wait_until

POLICY = """
[admission]
retry_after_s = 2

[admission.max_in_flight]
"slow.cap" = 1
"""


@pytest.fixture
def coordinator(settings: Settings, tmp_path: Path) -> Iterator[ServerThread]:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    limited = settings.model_copy(update={"max_in_flight": 2, "policy_file": policy})
    with ServerThread(create_app(limited)) as server:
        yield server


@pytest.fixture
def http(coordinator: ServerThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=coordinator.url, timeout=10) as client:
        yield client


def shed(http: httpx.Client) -> dict[tuple[str, str], float]:
    counts = {}
    for line in http.get("/metrics").text.splitlines():
        if line.startswith("agent_reach_shed_total{"):
            labels, value = line[len("agent_reach_shed_total{") :].split("} ")
            pairs = dict(item.split("=") for item in labels.split(","))
            counts[(pairs["limit"].strip('"'), pairs["answer"].strip('"'))] = float(value)
    return counts


def hold(pool: ThreadPoolExecutor, http: httpx.Client, body: dict[str, Any]) -> Future[Any]:
    return pool.submit(http.post, "/v1/invoke", json=body)


def test_beyond_max_in_flight_a_request_gets_503_overloaded_at_once(http, gated_agents, register):
    agent, endpoint = gated_agents()
    assert register("slow-1", endpoint, "echo").status_code == 201
    with ThreadPoolExecutor(2) as pool:
        held = [hold(pool, http, {"capability": "echo", "payload": {"n": n}}) for n in range(2)]
        wait_until(lambda: len(agent.received) == 2, "two requests to reach the agent")

        refused = http.post("/v1/invoke", json={"capability": "echo", "request_id": "over-1"})

        agent.gate.set()
        assert [f.result().status_code for f in held] == [200, 200]
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "overloaded"
    assert refused.json()["error"]["limit"] == "coordinator"
    assert refused.headers["retry-after"] == "2"
    assert len(agent.received) == 2  # the refused request never reached the agent
    assert shed(http) == {("coordinator", "overloaded"): 1.0}

    again = http.post("/v1/invoke", json={"capability": "echo", "request_id": "over-1"})
    assert again.status_code == 200, again.text  # never started: the same id runs now
    assert len(agent.received) == 3


def test_a_capability_at_its_policy_limit_is_refused_while_others_pass(
    http, fake_agents, gated_agents, register
):
    slow, slow_endpoint = gated_agents()
    fast, fast_endpoint = fake_agents()
    assert register("slow-1", slow_endpoint, "slow.cap").status_code == 201
    assert register("fast-1", fast_endpoint, "fast.cap").status_code == 201
    with ThreadPoolExecutor(1) as pool:
        held = hold(pool, http, {"capability": "slow.cap"})
        wait_until(lambda: len(slow.received) == 1, "the first request to reach the agent")

        refused = http.post("/v1/invoke", json={"capability": "slow.cap", "request_id": "cap-1"})
        other = http.post("/v1/invoke", json={"capability": "fast.cap"})

        slow.gate.set()
        assert held.result().status_code == 200
    assert refused.status_code == 503
    assert refused.json()["error"]["limit"] == "capability"
    assert other.status_code == 200, other.text
    assert (len(slow.received), len(fast.received)) == (1, 1)
    assert shed(http) == {("capability", "overloaded"): 1.0}
    walk = http.get("/v1/requests/cap-1/why").json()
    assert walk["first_wrong_step"] == "routing"
    assert "admission control refused it" in walk["steps"][0]["finding"]


def test_a_refused_request_with_a_remembered_answer_gets_it_marked_degraded(
    coordinator: ServerThread, http, gated_agents, register
):
    agent, endpoint = gated_agents(answer={"stock": 7})
    agent.gate.set()  # the first answer goes at once, to be remembered
    assert register("slow-1", endpoint, "slow.cap", safe=True).status_code == 201
    payload = {"sku": "A-1"}
    assert http.post("/v1/invoke", json={"capability": "slow.cap", "payload": payload}).is_success
    app = coordinator.app
    assert isinstance(app, CoordinatorApp) and app.runtime is not None
    answers, loop = app.runtime.invoke.parking.answers, coordinator.loop
    assert loop is not None
    wait_until(
        lambda: asyncio.run_coroutine_threadsafe(
            answers.recall("slow.cap", payload), loop
        ).result(),
        "the answer to be remembered",
    )
    agent.gate.clear()  # the next one is held until the degraded answer is in
    with ThreadPoolExecutor(1) as pool:
        held = hold(pool, http, {"capability": "slow.cap", "payload": {"sku": "B-2"}})
        wait_until(lambda: len(agent.received) == 2, "the holding request to reach the agent")

        degraded = http.post("/v1/invoke", json={"capability": "slow.cap", "payload": payload})

        agent.gate.set()
        assert held.result().status_code == 200
    assert degraded.status_code == 200, degraded.text
    body = degraded.json()
    assert (body["status"], body["result"]) == ("degraded", {"stock": 7})
    assert body["degraded"] == {"reason": "overloaded", "limit": "capability"}
    assert len(agent.received) == 2
    assert shed(http) == {("capability", "degraded"): 1.0}
