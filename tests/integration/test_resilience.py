"""Delivery that survives failure, against real FakeAgents, on memory and Redis."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agent_reach.config import Settings
from agent_reach.registry.health import OFFLINE_AFTER
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, run_coordinator
from agent_reach.testing.waiting import wait_all_healthy, wait_until

POLICY = """
[timeout_classes.quick]
timeout_s = 1.0
retries = 1

[timeout_classes.strict]
timeout_s = 1.0

[delivery]
backoff_s = [0.05]
suspend_s = 1.5
"""


@pytest.fixture
def coordinator(settings: Settings, tmp_path) -> Iterator[str]:
    """A coordinator with short timeouts, a short suspension and 100 ms probes."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    fast = settings.model_copy(update={"policy_file": policy, "probe_interval_s": 0.1})
    with run_coordinator(fast) as (url, _):
        yield url


def invoke(http: httpx.Client, capability: str = "echo", **body: object) -> httpx.Response:
    return http.post("/v1/invoke", json={"capability": capability, **body})


def test_a_failing_instance_hands_over_to_the_next_best(http, register, fake_agents):
    bad, bad_endpoint = fake_agents(status=503)
    good, good_endpoint = fake_agents()
    register("bad-1", bad_endpoint, "echo", weight=2.0)  # scored first
    register("good-1", good_endpoint, "echo")
    wait_all_healthy(http)
    answer = invoke(http, payload={"n": 1}).json()
    assert answer["status"] == "fallback"
    assert answer["agent_id"] == "good-1"
    assert [(a["agent_id"], a["outcome"]) for a in answer["attempts"]] == [
        ("bad-1", "agent_error"),
        ("good-1", "ok"),
    ]
    assert len(bad.received) == 1 and len(good.received) == 1


def test_refused_connections_move_on_without_waiting(http, register, fake_agents):
    # Its health check fails too, so neither is ever probed healthy: both stay `unknown`
    # and the weight alone puts the refusing one first.
    _good, endpoint = fake_agents(healthy=False)
    register("ghost-1", "http://127.0.0.1:9/invoke", "echo", weight=3.0)
    register("good-1", endpoint, "echo")
    answer = invoke(http).json()
    assert answer["agent_id"] == "good-1"
    assert answer["attempts"][0]["outcome"] == "agent_unreachable"


def test_a_timeout_in_a_class_without_retries_is_504_outcome_unknown(http, register, fake_agents):
    _slow, endpoint = fake_agents(delay_s=3.0)
    fast, fast_endpoint = fake_agents()
    register("slow-1", endpoint, "echo", timeout_class="strict", weight=2.0)
    register("fast-1", fast_endpoint, "echo", timeout_class="strict")
    wait_all_healthy(http)
    response = invoke(http, timeout_class="strict")
    assert response.status_code == 504
    error = response.json()["error"]
    assert error["code"] == "agent_timeout" and error["outcome_unknown"] is True
    assert fast.received == []  # a timeout may have acted: no re-send without retries


def test_a_timeout_is_resent_once_to_another_instance(http, register, fake_agents):
    _slow, endpoint = fake_agents(delay_s=3.0)
    fast, fast_endpoint = fake_agents()
    register("slow-1", endpoint, "echo", timeout_class="quick", weight=2.0)
    register("fast-1", fast_endpoint, "echo", timeout_class="quick")
    wait_all_healthy(http)
    answer = invoke(http, request_id="resend-1").json()
    assert answer["agent_id"] == "fast-1"
    assert [a["outcome"] for a in answer["attempts"]] == ["agent_timeout", "ok"]
    assert fast.received[0].body["request_id"] == "resend-1"  # the same id travels on


def test_a_generic_agent_catches_what_every_instance_failed(http, register, fake_agents):
    _, bad_endpoint = fake_agents(status=500)
    human, human_endpoint = fake_agents(answer={"handed_to": "人工客服"})
    register("bad-1", bad_endpoint, "inventory.check")
    register("human-1", human_endpoint, "human.handoff", generic=True)
    answer = invoke(http, "inventory.check").json()
    assert answer["status"] == "fallback"
    assert answer["agent_id"] == "human-1"
    assert answer["result"] == {"handed_to": "人工客服"}
    assert human.received[0].body["capability"] == "inventory.check"


def test_a_repeated_request_id_executes_once_and_replays_the_same_bytes(
    http, register, fake_agents
):
    agent, endpoint = fake_agents()
    register("a-1", endpoint, "echo")
    first = invoke(http, request_id="order-7", payload={"sku": "X"})
    second = invoke(http, request_id="order-7", payload={"sku": "X"})
    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    assert len(agent.received) == 1
    reused = invoke(http, request_id="order-7", payload={"sku": "Y"})
    assert reused.status_code == 422
    assert reused.json()["error"]["code"] == "idempotency_key_reused"
    assert len(agent.received) == 1


def test_concurrent_duplicates_wait_for_the_first_or_get_409(http, register, gated_agents):
    # The first delivery holds its answer until the 409 is in: with a fixed 0.4 s delay,
    # a 0.4 s stall before the rejecting call made it a replayed 200.
    agent, endpoint = gated_agents()
    register("a-1", endpoint, "echo")
    answers: list[httpx.Response] = []

    def call() -> None:
        with httpx.Client(base_url=str(http.base_url), timeout=10) as own:
            answers.append(invoke(own, request_id="dup-1", payload={"n": 1}))

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    wait_until(lambda: agent.received, "the first delivery")
    rejected = invoke(http, request_id="dup-1", payload={"n": 1}, on_duplicate="reject")
    agent.gate.set()
    for thread in threads:
        thread.join()
    assert rejected.status_code == 409
    assert rejected.json()["error"]["code"] == "in_progress"
    assert [a.status_code for a in answers] == [200] * 8
    assert len({a.content for a in answers}) == 1
    assert len(agent.received) == 1


def test_the_hop_limit_refuses_and_dead_letters(http, register, fake_agents):
    agent, endpoint = fake_agents()
    register("a-1", endpoint, "echo")
    response = http.post(
        "/v1/invoke",
        json={"capability": "echo", "request_id": "loop-1", "payload": {"n": 1}},
        headers={"x-reach-hop": "0"},
    )
    assert response.status_code == 508
    assert response.json()["error"]["code"] == "hop_limit"
    letters = http.get("/v1/deadletters").json()
    assert letters["count"] == 1
    assert letters["items"][0]["request_id"] == "loop-1"
    assert letters["items"][0]["reason"] == "hop_limit"
    assert agent.received == []


def test_async_mode_answers_202_and_the_task_finishes(http, register, fake_agents):
    agent, endpoint = fake_agents(answer={"done": True})
    register("a-1", endpoint, "echo")
    accepted = invoke(http, request_id="job-1", mode="async")
    assert accepted.status_code == 202
    assert accepted.json()["status"] == "queued"
    task = wait_until(
        lambda: (t := http.get("/v1/tasks/job-1").json()).get("http_status") and t,
        "the asynchronous task to finish",
    )
    assert task["status"] == "ok"
    assert task["answer"]["result"] == {"done": True}
    assert len(agent.received) == 1


def test_unknown_tasks_are_404(http):
    response = http.get("/v1/tasks/nothing-here")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "unknown_task"


def test_a_suspended_request_is_replayed_once_an_instance_works_again(http, register, fake_agents):
    agent, endpoint = fake_agents(status=503)
    register("a-1", endpoint, "echo")
    accepted = invoke(http, request_id="parked-1", payload={"q": 1})
    assert accepted.status_code == 202
    assert accepted.json()["status"] == "suspended"
    agent.status = 200
    task = wait_until(
        lambda: (t := http.get("/v1/tasks/parked-1").json()).get("http_status") and t,
        "the suspended request to be replayed",
    )
    assert task["status"] == "ok"
    executed = [r for r in agent.received if r.body["request_id"] == "parked-1"]
    assert executed[-1].body["payload"] == {"q": 1}
    again = invoke(http, request_id="parked-1", payload={"q": 1})
    assert again.status_code == 202  # the id replays its acceptance; the task holds the answer


class DeclinesThenCutsShort:
    """A FakeAgent that declines its first delivery (503) and takes every later one,
    its answer cut short (the connection closes mid-answer: it may have acted)."""

    def __init__(self) -> None:
        self.agent = FakeAgent()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            first = not self.agent.received
            self.agent.status = 503 if first else 200
            self.agent.headers = {} if first else {"content-length": "1000"}
        await self.agent(scope, receive, send)


def test_a_replay_that_may_have_acted_ends_the_suspended_request(http, register):
    # declared idempotent, and still not sent again: a guard by request id is the
    # instance's own, and a restarted process has forgotten what it ran
    flaky = DeclinesThenCutsShort()
    with ServerThread(flaky) as server:
        register("a-1", f"{server.url}/invoke", "echo", idempotent=True)
        accepted = invoke(http, request_id="parked-2", payload={"q": 2})
        assert accepted.json()["status"] == "suspended"
        task = wait_until(
            lambda: (t := http.get("/v1/tasks/parked-2").json()).get("http_status") and t,
            "the replay to end the suspended request",
        )

    assert (task["status"], task["http_status"]) == ("error", 502), task
    assert task["answer"]["error"]["outcome_unknown"] is True
    assert [r.body["request_id"] for r in flaky.agent.received] == ["parked-2", "parked-2"]


def test_an_expired_suspension_serves_a_remembered_answer_as_degraded(http, register, fake_agents):
    agent, endpoint = fake_agents(answer={"stock": 3})
    register("a-1", endpoint, "echo", safe=True)  # a lookup: no side effects
    assert invoke(http, payload={"sku": "A"}).json()["result"] == {"stock": 3}
    agent.status = 503
    accepted = invoke(http, request_id="late-1", payload={"sku": "A"}).json()
    assert accepted["status"] == "suspended"
    task = wait_until(
        lambda: (t := http.get("/v1/tasks/late-1").json()).get("http_status") and t,
        "the suspension to expire",
    )
    assert task["status"] == "degraded"
    assert task["answer"]["result"] == {"stock": 3}


def test_an_expired_suspension_without_a_remembered_answer_is_an_error(http, register, fake_agents):
    _, endpoint = fake_agents(status=503)
    register("a-1", endpoint, "echo")
    invoke(http, request_id="late-2", payload={"never": "seen"})
    task = wait_until(
        lambda: (t := http.get("/v1/tasks/late-2").json()).get("http_status") and t,
        "the suspension to expire",
    )
    assert task["status"] == "error"
    assert task["http_status"] == 503
    assert task["answer"]["error"]["code"] == "no_instance"


def test_probes_take_an_unhealthy_instance_offline_and_bring_it_back(http, register, fake_agents):
    agent, endpoint = fake_agents()
    register("a-1", endpoint, "echo")

    def status() -> str:
        return http.get("/v1/agents/a-1").json()["status"]

    wait_until(lambda: status() == "healthy", "the probe sent at registration to pass")

    def marked(state: str) -> bool:
        line = f'agent_reach_health_transitions_total{{state="{state}"}} 1.0'
        return line in http.get("/metrics").text.splitlines()

    agent.healthy = False
    # suspect lasts 2 probes (a few tenths of a second): counted, not caught, so a slow
    # poll cannot miss it (an 0.8 s poll did: the wait for "suspect" saw only "offline")
    wait_until(lambda: marked("suspect"), "3 failed probes to mark it suspect")
    wait_until(lambda: status() == "offline", "2 more failed probes to take it offline")
    response = invoke(http, suspend=False)
    assert response.status_code == 503
    agent.healthy = True
    wait_until(lambda: status() == "healthy", "a passing probe to bring it back")
    assert invoke(http).status_code == 200


def test_failed_deliveries_take_an_instance_offline_without_probes(
    settings: Settings, tmp_path, fake_agents
):
    # Probes pass but are rare (60 s): a passing probe between two failed deliveries would
    # clear the count, so only the deliveries can take it out, after exactly OFFLINE_AFTER.
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    slow_probes = settings.model_copy(update={"policy_file": policy, "probe_interval_s": 60.0})
    bad, bad_endpoint = fake_agents(status=503)
    _, good_endpoint = fake_agents()
    bad.healthy = True  # probes pass: only deliveries tell
    with run_coordinator(slow_probes) as (url, _), httpx.Client(base_url=url) as http:
        for agent_id, endpoint, weight in (
            ("bad-1", bad_endpoint, 5.0),
            ("good-1", good_endpoint, 1.0),
        ):
            body = {"id": agent_id, "capabilities": ["echo"], "weight": weight,
                    "transport": {"type": "http", "endpoint": endpoint}}  # fmt: skip
            assert http.post("/v1/agents", json=body).status_code == 201
        wait_all_healthy(http)
        for _ in range(4 * OFFLINE_AFTER):  # bounded by calls, not by the clock
            assert invoke(http).json()["agent_id"] == "good-1"
            if http.get("/v1/agents/bad-1").json()["status"] == "offline":
                break
        assert http.get("/v1/agents/bad-1").json()["status"] == "offline"
        assert len(bad.received) == OFFLINE_AFTER  # offline after 5 consecutive failures
        lines = http.get("/metrics").text.splitlines()
    # each failed delivery was handed to the next instance, and counted as such
    assert f'agent_reach_fallbacks_total{{stage="next_instance"}} {OFFLINE_AFTER}.0' in lines
    assert f'agent_reach_retries_total{{kind="next_instance"}} {OFFLINE_AFTER}.0' in lines
    assert 'agent_reach_health_transitions_total{state="offline"} 1.0' in lines


def test_a_readmitted_instance_starts_with_a_clean_window(http, register, fake_agents):
    bad, endpoint = fake_agents(status=503)
    register("bad-1", endpoint, "echo")

    def view() -> dict:
        return http.get("/v1/agents/bad-1").json()

    # Its probes fail too: a passing one between two failed deliveries (every 100 ms)
    # would start the count over, and a busy host's deliveries may be that far apart.
    bad.healthy = False
    for _ in range(5):
        invoke(http, suspend=False)
    wait_until(lambda: view()["status"] == "offline", "5 failures to eject it")
    assert view()["stats"]["success_rate"] == 0.0
    bad.status, bad.healthy = 200, True
    readmitted = wait_until(
        lambda: (v := view())["status"] == "healthy" and v, "a passing probe after the pause"
    )
    assert readmitted["stats"]["calls"] == 0  # the old failures no longer score it down
    assert invoke(http).json()["agent_id"] == "bad-1"
