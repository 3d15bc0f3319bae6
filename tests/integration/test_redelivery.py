"""A caller's request id that may already have reached an agent goes back to that agent,
and only when that agent declared `idempotent`.

An attempt whose outcome is unknown (a timeout) gives the id back so the caller may try
again; the id's record keeps the instances it was sent to, and the retry goes to the
same instance, whose own guard by request_id knows it, rather than to the instance the
scores would pick, which could act a second time. An instance that did not declare
`idempotent` is never sent it again: the retry ends 502 `outcome_unknown`. The same
record is what a coordinator taking over a dead one's request reads
(`tests/contract/test_idempotency_store.py`, `test_takeover_by_liveness.py`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_reach.config import Settings
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, run_coordinator
from agent_reach.testing.waiting import wait_all_healthy, wait_until

# The retry must connect afresh and be answered within the class's time: 0.3 s left no
# room on a loaded CI host, where a connect on loopback once took longer (the loop thread
# shares the GIL with the test's agents); 1 s does, and the slow agent outlasts it.
POLICY = """
[timeout_classes.quick]
timeout_s = 1.0
retries = 0
"""


@pytest.fixture(params=["memory", "redis"])
def coordinator(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    settings = Settings(decision_log="off", policy_file=policy)
    if request.param == "redis":
        settings = Settings(
            decision_log="off",
            policy_file=policy,
            registry_backend="redis",
            redis_url=request.getfixturevalue("redis_url"),
            redis_prefix=request.getfixturevalue("redis_prefix"),
        )
    with run_coordinator(settings) as (url, _):
        yield url


def register(
    http: httpx.Client,
    agent_id: str,
    server: ServerThread,
    capability: str,
    weight: float,
    **extra: object,
) -> dict[str, object]:
    """Register a FakeAgent's server as an instance of `capability`; the registration."""
    answer = http.post(
        "/v1/agents",
        json={
            "id": agent_id,
            "capabilities": [capability],
            "transport": {"endpoint": f"{server.url}/invoke"},
            "weight": weight,
            **extra,
        },
    )
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def test_a_retry_of_an_unknown_outcome_goes_back_to_the_instance_it_reached(
    coordinator: str,
) -> None:
    slow, preferred = FakeAgent(name="slow", delay_s=3.0), FakeAgent(name="preferred")
    with (
        ServerThread(slow) as slow_server,
        ServerThread(preferred) as preferred_server,
        httpx.Client(base_url=coordinator, timeout=10) as http,
    ):

        def invoke(request_id: str | None) -> httpx.Response:
            body = {"capability": "pay.charge", "payload": {"order": "A1"}}
            if request_id is not None:
                body["request_id"] = request_id
            return http.post("/v1/invoke", json={**body, "timeout_class": "quick"})

        register(http, "slow-1", slow_server, "pay.charge", 1, idempotent=True)
        first = invoke("order-A1-pay")
        assert first.status_code == 504, first.text
        assert first.json()["error"]["outcome_unknown"] is True

        slow.delay_s = 0.0
        register(http, "preferred-1", preferred_server, "pay.charge", 10, idempotent=True)
        wait_until(  # until then it is `unknown`, and any instance that answered wins
            lambda: http.get("/v1/agents/preferred-1").json()["status"] == "healthy",
            "the probe sent at registration to pass",
        )
        control = invoke(None)  # a new request goes where the scores say
        assert control.json()["agent_id"] == "preferred-1", control.text

        again = invoke("order-A1-pay")

        assert again.status_code == 200, again.text
        assert again.json()["agent_id"] == "slow-1"
        order_a1 = [r for r in preferred.received if r.body.get("request_id") == "order-A1-pay"]
        assert (len(slow.received), order_a1) == (2, [])
        assert all(r.body["request_id"] == "order-A1-pay" for r in slow.received)


def test_a_retry_of_an_unknown_outcome_is_not_sent_to_an_undeclared_agent(
    coordinator: str,
) -> None:
    slow, other = FakeAgent(name="slow", delay_s=3.0), FakeAgent(name="other")
    with (
        ServerThread(slow) as slow_server,
        ServerThread(other) as other_server,
        httpx.Client(base_url=coordinator, timeout=10) as http,
    ):
        plain = (("plain-1", slow_server, 10), ("plain-2", other_server, 1))
        for agent_id, server, weight in plain:
            assert register(http, agent_id, server, "pay.refund", weight)["idempotent"] is False
        body = {"capability": "pay.refund", "request_id": "refund-B2", "timeout_class": "quick"}
        first = http.post("/v1/invoke", json=body)
        assert first.status_code == 504, first.text
        slow.delay_s = 0.0

        again = http.post("/v1/invoke", json=body)

        assert again.status_code == 502, again.text
        assert again.json()["error"]["code"] == "outcome_unknown"
        assert again.json()["error"]["sent_to"] == ["plain-1"]
        deliveries = [r for r in slow.received + other.received if r.body.get("request_id")]
        assert len(deliveries) == 1  # the first one; never sent again, to either instance
        listed = {a["id"]: a["idempotent"] for a in http.get("/v1/agents").json()["agents"]}
        assert listed == {"plain-1": False, "plain-2": False}


def test_a_retry_of_an_unknown_outcome_is_not_sent_to_another_idempotent_instance(
    coordinator: str,
) -> None:
    """Another instance's guard never saw the id: declaring `idempotent` does not make it
    safe to send there, so with the instance it reached gone the retry is not sent."""
    slow, other = FakeAgent(name="slow", delay_s=3.0), FakeAgent(name="other")
    with (
        ServerThread(slow) as slow_server,
        ServerThread(other) as other_server,
        httpx.Client(base_url=coordinator, timeout=10) as http,
    ):
        register(http, "guarded-1", slow_server, "pay.capture", 10, idempotent=True)
        register(http, "guarded-2", other_server, "pay.capture", 1, idempotent=True)
        wait_all_healthy(http)
        body = {"capability": "pay.capture", "request_id": "capture-C3", "timeout_class": "quick"}
        first = http.post("/v1/invoke", json=body)
        assert first.status_code == 504, first.text
        assert http.delete("/v1/agents/guarded-1").status_code == 204

        again = http.post("/v1/invoke", json=body)

        assert again.status_code == 502, again.text
        assert again.json()["error"]["code"] == "outcome_unknown"
        assert again.json()["error"]["sent_to"] == ["guarded-1"]
        assert [r.body["request_id"] for r in slow.received] == ["capture-C3"]
        assert other.received == []


def test_a_retry_of_an_unknown_outcome_of_a_safe_capability_may_go_to_any_instance(
    coordinator: str,
) -> None:
    """No side effects (`safe`): the retry is not bound to the instance it reached."""
    slow, other = FakeAgent(name="slow", delay_s=3.0), FakeAgent(name="other")
    with (
        ServerThread(slow) as slow_server,
        ServerThread(other) as other_server,
        httpx.Client(base_url=coordinator, timeout=10) as http,
    ):
        register(http, "lookup-1", slow_server, "stock.look", 10, safe=True)
        register(http, "lookup-2", other_server, "stock.look", 1, safe=True)
        wait_all_healthy(http)
        body = {"capability": "stock.look", "request_id": "look-D4", "timeout_class": "quick"}
        first = http.post("/v1/invoke", json=body)
        assert first.status_code == 504, first.text
        assert http.delete("/v1/agents/lookup-1").status_code == 204

        again = http.post("/v1/invoke", json=body)

        assert again.status_code == 200, again.text
        assert again.json()["agent_id"] == "lookup-2"
        assert [r.body["request_id"] for r in other.received] == ["look-D4"]
