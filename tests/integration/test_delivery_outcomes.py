"""What the attempt loop makes of failures after a delivery may have reached an agent,
and of connects that got no answer (real coordinator, real agents on 127.0.0.1)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_reach.config import Settings
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, run_coordinator
from agent_reach.testing.waiting import wait_until

# 1 s per try, one re-send allowed, no pause before it.
POLICY = """
[timeout_classes.query]
timeout_s = 1.0
retries = 1

[delivery]
backoff_s = [0.0]
"""


@pytest.fixture
def coordinator(tmp_path: Path) -> Iterator[httpx.Client]:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    settings = Settings(decision_log="off", policy_file=policy, probe_interval_s=3600)
    with run_coordinator(settings) as (url, _), httpx.Client(base_url=url, timeout=10) as http:
        yield http


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def full_backlog() -> Iterator[str]:
    """An endpoint whose accept queue is full: every new SYN is dropped."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        fillers = [socket.socket() for _ in range(3)]
        for filler in fillers:
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(listener.getsockname())
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/invoke"
        for filler in fillers:
            filler.close()


def register(http: httpx.Client, agent_id: str, endpoint: str, weight: float = 1.0) -> None:
    body = {
        "id": agent_id,
        "capabilities": ["pay"],
        "transport": {"endpoint": endpoint},
        "weight": weight,
    }
    assert http.post("/v1/agents", json=body).status_code == 201


def test_a_timeout_then_an_unreachable_instance_is_the_timeout_never_a_parked_request(
    coordinator: httpx.Client, closed_port: int
) -> None:
    agent = FakeAgent(delay_s=3.0)
    with ServerThread(agent) as server:
        register(coordinator, "a-slow", f"{server.url}/invoke")  # chosen first: higher weight
        register(coordinator, "b-down", f"http://127.0.0.1:{closed_port}/invoke", weight=0.5)
        body = {"capability": "pay", "request_id": "order-A1-pay", "payload": {}}
        response = coordinator.post("/v1/invoke", json=body)
        assert response.status_code == 504, response.text  # not 202 "suspended" for a replay
        error = response.json()["error"]
        assert (error["code"], error["outcome_unknown"]) == ("agent_timeout", True)
        assert [a["agent_id"] for a in error["attempts"]] == ["a-slow", "b-down"]
        assert len(agent.received) == 1


def test_connect_timeouts_do_not_count_against_an_instances_health(
    coordinator: httpx.Client, full_backlog: str
) -> None:
    register(coordinator, "busy-1", full_backlog)
    for n in range(4):  # 3 failed deliveries would make it suspect
        body = {"capability": "pay", "request_id": f"r-{n}", "payload": {}, "suspend": False}
        response = coordinator.post("/v1/invoke", json=body)
        assert response.status_code == 503, response.text
        attempt = response.json()["error"]["attempts"][0]
        assert attempt["outcome"] == "agent_unreachable"
        assert "timed out" in attempt["error"]
    wait_until(
        lambda: 'agent_reach_probes_total{result="fail"} 1.0' in coordinator.get("/metrics").text,
        "the probe sent at registration to fail",
    )
    (agent,) = coordinator.get("/v1/agents").json()["agents"]
    # Its probes cannot connect either, so it never answered: `unknown`, not out. Had the
    # 4 connect timeouts counted, they and the registration's probe would be 5: offline.
    assert agent["status"] == "unknown"


def test_a_5xx_then_an_unreachable_instance_is_the_5xx_never_a_parked_request(
    coordinator: httpx.Client, closed_port: int
) -> None:
    agent = FakeAgent(status=500, answer={"error": "charged, then crashed"})
    with ServerThread(agent) as server:
        register(coordinator, "a-failing", f"{server.url}/invoke")
        register(coordinator, "b-down", f"http://127.0.0.1:{closed_port}/invoke", weight=0.5)
        body = {"capability": "pay", "request_id": "order-A2-pay", "payload": {}}
        response = coordinator.post("/v1/invoke", json=body)
        assert response.status_code == 502, response.text  # not 202 "suspended" for a replay
        error = response.json()["error"]
        assert (error["code"], error["http_status"]) == ("agent_error", 500)
        assert [a["agent_id"] for a in error["attempts"]] == ["a-failing", "b-down"]
        assert coordinator.get("/v1/tasks/order-A2-pay").status_code == 404
        assert coordinator.get("/v1/queues").json()["suspended"] == 0
        assert len(agent.received) == 1


def test_a_503_then_an_unreachable_instance_may_still_be_parked(
    coordinator: httpx.Client, closed_port: int
) -> None:
    agent = FakeAgent(status=503)
    with ServerThread(agent) as server:
        register(coordinator, "a-busy", f"{server.url}/invoke")
        register(coordinator, "b-down", f"http://127.0.0.1:{closed_port}/invoke", weight=0.5)
        body = {"capability": "pay", "request_id": "order-A3-pay", "payload": {}}
        response = coordinator.post("/v1/invoke", json=body)
        assert response.status_code == 202, response.text
        assert response.json()["status"] == "suspended"
