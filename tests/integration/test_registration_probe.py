"""Registration probes at once: an instance is `unknown` until a probe answers, routing
prefers instances that answered, and a request no instance took says why (memory, Redis)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest

from agent_reach.config import Settings
from agent_reach.sdk.client import SyncReachClient, TaskPending
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_until

FAILED_PROBE = 'agent_reach_probes_total{result="fail"} 1.0'


@pytest.fixture
def coordinator(settings: Settings) -> Iterator[str]:
    """Probes every hour: only the probe sent at registration can answer during a test."""
    with run_coordinator(settings.model_copy(update={"probe_interval_s": 3600.0})) as (url, _):
        yield url


@pytest.fixture
def dead_endpoint() -> str:
    """An endpoint where nothing listens (connections are refused)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        port = int(holder.getsockname()[1])
    return f"http://127.0.0.1:{port}/invoke"


def status_of(http: httpx.Client, agent_id: str) -> str:
    return str(http.get(f"/v1/agents/{agent_id}").json()["status"])


def test_a_live_agent_is_healthy_without_waiting_a_probe_interval(http, register, fake_agents):
    _, endpoint = fake_agents()
    response = register("live-1", endpoint, "echo")
    assert response.json()["status"] == "unknown"  # nothing has answered yet
    wait_until(lambda: status_of(http, "live-1") == "healthy", "the registration's probe")


def test_a_dead_endpoint_is_unknown_and_its_invoke_says_why_it_was_suspended(
    http, register, dead_endpoint
):
    register("dead-1", dead_endpoint, "echo")
    wait_until(lambda: FAILED_PROBE in http.get("/metrics").text, "the registration's probe")
    assert status_of(http, "dead-1") == "unknown"

    response = http.post("/v1/invoke", json={"capability": "echo", "payload": {}})

    assert response.status_code == 202, response.text
    body = response.json()
    assert body["status"] == "suspended"
    [instance] = body["instances"]
    assert (instance["agent_id"], instance["status"]) == ("dead-1", "unknown")
    assert instance["last_error"].startswith("agent_unreachable: ")
    task = http.get(body["poll"]).json()
    assert task["instances"] == body["instances"]  # polling the task tells the same


def test_the_sdk_names_the_instance_and_its_error_when_a_task_stays_suspended(
    coordinator, register, dead_endpoint
):
    register("dead-1", dead_endpoint, "echo")
    with SyncReachClient(coordinator) as client, pytest.raises(TaskPending) as pending:
        client.invoke("echo", payload={}, wait_s=0)
    assert pending.value.task.instances is not None
    assert "dead-1 (unknown): agent_unreachable" in str(pending.value)


def test_an_instance_that_answered_is_preferred_to_one_that_never_did(
    http, register, fake_agents, dead_endpoint
):
    _, endpoint = fake_agents()
    register("dead-1", dead_endpoint, "echo", weight=5.0)  # would win on its weight
    register("live-1", endpoint, "echo")
    wait_until(lambda: status_of(http, "live-1") == "healthy", "the registration's probe")

    response = http.post("/v1/invoke", json={"capability": "echo", "payload": {}})

    assert response.status_code == 200, response.text
    assert [a["agent_id"] for a in response.json()["attempts"]] == ["live-1"]  # no detour
