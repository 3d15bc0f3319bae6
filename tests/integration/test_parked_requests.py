"""Parked (suspended) requests end truthfully: what their 202 and task say, how a replay
that cannot change ends at once, and what the error says when their time runs out.

Real coordinators (memory and Redis) and real FakeAgents on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agent_reach.config import Settings
from agent_reach.testing.fake_agent import FakeAgent, Scope
from agent_reach.testing.servers import ServerThread, run_coordinator
from agent_reach.testing.waiting import wait_until

POLICY = """
[delivery]
suspend_s = {suspend_s}
"""


def _coordinator(settings: Settings, tmp_path: Any, suspend_s: float) -> Any:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY.format(suspend_s=suspend_s), encoding="utf-8")
    return run_coordinator(settings.model_copy(update={"policy_file": policy}))


@pytest.fixture
def coordinator(settings: Settings, tmp_path: Any) -> Iterator[str]:
    """Suspended requests wait 1.5 s."""
    with _coordinator(settings, tmp_path, 1.5) as (url, _):
        yield url


@pytest.fixture
def patient(settings: Settings, tmp_path: Any) -> Iterator[httpx.Client]:
    """Suspended requests wait a minute: a test that ends one sooner shows why it did."""
    with (
        _coordinator(settings, tmp_path, 60) as (url, _),
        httpx.Client(base_url=url, timeout=10) as http,
    ):
        yield http


def park(http: httpx.Client, request_id: str) -> dict[str, Any]:
    body = {"capability": "refund.issue", "request_id": request_id, "payload": {"order": "A1"}}
    accepted: dict[str, Any] = http.post("/v1/invoke", json=body).json()
    assert accepted["status"] == "suspended", accepted
    return accepted


def ended(http: httpx.Client, request_id: str, timeout_s: float = 10) -> dict[str, Any]:
    task: dict[str, Any] = wait_until(
        lambda: (t := http.get(f"/v1/tasks/{request_id}").json()).get("http_status") and t,
        "the parked request to end",
        timeout_s=timeout_s,
    )
    return task


def task_spans(http: httpx.Client, trace_id: str) -> list[dict[str, Any]]:
    spans: list[dict[str, Any]] = http.get(f"/v1/traces/{trace_id}").json()["spans"]
    return [s for s in spans if s["kind"] == "task"]


def test_a_request_parked_for_a_disabled_agent_says_so_and_its_expiry_names_it(
    http: httpx.Client, fake_agents: Any, register: Any
) -> None:
    agent, endpoint = fake_agents()
    register("refund-01", endpoint, "refund.issue")
    assert http.post("/v1/agents/refund-01/disable").status_code == 200

    accepted = park(http, "parked-1")
    task = http.get("/v1/tasks/parked-1").json()
    walk = http.get("/v1/requests/parked-1/why").json()
    final = ended(http, "parked-1")

    for view in (accepted, task):
        [instance] = view["instances"]
        assert instance["agent_id"] == "refund-01"
        assert isinstance(instance["disabled"]["by"], str)
        assert isinstance(instance["disabled"]["at"], float)
    delivery = next(s for s in walk["steps"] if s["step"] == "delivery")
    assert "refund-01 is disabled (kill switch)" in delivery["finding"]
    error = final["answer"]["error"]
    assert (final["http_status"], error["code"]) == (503, "no_instance")
    assert "refund-01 is disabled (kill switch) by" in error["message"]
    assert agent.received == []


def test_a_request_that_may_not_park_names_the_kill_switch_when_it_holds_every_instance(
    http: httpx.Client, fake_agents: Any, register: Any
) -> None:
    agent, endpoint = fake_agents()
    register("refund-01", endpoint, "refund.issue")
    register("refund-02", endpoint, "refund.issue")
    body = {"capability": "refund.issue", "payload": {"order": "A1"}, "suspend": False}
    assert http.post("/v1/agents/refund-01/disable").status_code == 200
    assert http.post("/v1/invoke", json=body).status_code == 200  # refund-02 serves

    assert http.post("/v1/agents/refund-02/disable").status_code == 200
    answer = http.post("/v1/invoke", json=body)
    error = answer.json()["error"]
    assert (answer.status_code, error["code"]) == (503, "no_instance")
    assert error["message"] == (
        "every instance of 'refund.issue' is disabled by an admin (kill switch): "
        "refund-01, refund-02"
    )
    assert len(agent.received) == 1


def test_an_expiry_after_declined_replays_says_how_the_last_replay_failed(
    http: httpx.Client, fake_agents: Any, register: Any
) -> None:
    agent, endpoint = fake_agents(status=503)
    register("refund-01", endpoint, "refund.issue")

    park(http, "parked-2")
    final = ended(http, "parked-2")

    error = final["answer"]["error"]
    assert (final["http_status"], error["code"]) == (503, "no_instance")
    assert "its last replay failed: refund-01 agent_error (HTTP 503)" in error["message"]
    assert error["last_replay"]["attempts"][0]["agent_id"] == "refund-01"
    assert len(agent.received) >= 2  # the first delivery and at least one replay


class DeclinesThen(FakeAgent):
    """Declines its first delivery (503), then answers `then` with `then_headers`."""

    def __init__(self, then: int, then_headers: dict[str, str] | None = None) -> None:
        super().__init__(status=503)
        self.then, self.then_headers = then, then_headers or {}

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and self.received:
            self.status, self.headers = self.then, self.then_headers
        await FakeAgent.__call__(self, scope, receive, send)


def add(http: httpx.Client, server: ServerThread) -> None:
    body = {
        "id": "refund-01",
        "capabilities": ["refund.issue"],
        "transport": {"endpoint": f"{server.url}/invoke"},
    }
    assert http.post("/v1/agents", json=body).status_code == 201


def test_a_replay_the_agent_refuses_for_good_ends_the_request_at_once(
    patient: httpx.Client,
) -> None:
    agent = DeclinesThen(401)  # say, a token it will not take: no replay changes that
    with ServerThread(agent) as server:
        add(patient, server)
        accepted = park(patient, "parked-3")
        final = ended(patient, "parked-3")

    error = final["answer"]["error"]
    assert (final["http_status"], error["code"], error["http_status"]) == (502, "agent_error", 401)
    assert len(agent.received) == 2  # the first delivery, one replay
    statuses = [s["status"] for s in task_spans(patient, accepted["trace_id"])]
    assert statuses == ["agent_error"]  # one run, no "replayed" heartbeat


def test_a_replay_answered_from_its_stored_outcome_ends_the_request(
    patient: httpx.Client,
) -> None:
    # a 500 the agent made final (X-Reach-Retryable: false) is kept for the task's run:
    # the next chance reads it back, and that ends the request with it, not 60 s later
    agent = DeclinesThen(500, {"x-reach-retryable": "false"})
    with ServerThread(agent) as server:
        add(patient, server)
        accepted = park(patient, "parked-4")
        final = ended(patient, "parked-4")

    error = final["answer"]["error"]
    assert (final["http_status"], error["code"], error["http_status"]) == (502, "agent_error", 500)
    assert len(agent.received) == 2
    statuses = [s["status"] for s in task_spans(patient, accepted["trace_id"])]
    assert statuses.count("replayed") <= 1
