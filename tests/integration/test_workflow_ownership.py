"""Runs and saved workflows are the caller's own (with API keys on), as tasks are."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import httpx
import pytest
from pydantic import SecretStr

from agent_reach.config import Settings
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, run_coordinator

POLICY = """
[[access.invoke]]
principals = ["domain:shop"]
capabilities = ["echo"]

[[access.register]]
principals = ["domain:agents"]
capabilities = ["echo"]
"""
CAST = (
    ("caller-a", "shop", "caller"),
    ("caller-b", "shop", "caller"),
    ("bot", "agents", "agent"),
    ("ops", "shop", "observer"),
)


@pytest.fixture
def secured(settings: Settings, tmp_path) -> Iterator[tuple[str, dict[str, str], FakeAgent]]:
    """A secured coordinator, keys for callers A and B (both may invoke `echo`) and its agent."""
    admin = secrets.token_urlsafe(24)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    secure = settings.model_copy(
        update={
            "auth": "on",
            "admin_key": SecretStr(admin),
            "endpoint_allow": ["127.0.0.0/8"],
            "policy_file": policy,
        }
    )
    agent = FakeAgent(answer={"n": 1})
    with ServerThread(agent) as server, run_coordinator(secure) as (url, _):
        keys = {}
        for principal, domain, role in CAST:
            minted = httpx.post(
                f"{url}/v1/keys",
                json={"principal": principal, "role": role, "domain": domain},
                headers={"Authorization": f"Bearer {admin}"},
            )
            assert minted.status_code == 201, minted.text
            keys[principal] = minted.json()["key"]
        registered = httpx.post(
            f"{url}/v1/agents",
            json={
                "id": "echo-1",
                "capabilities": ["echo"],
                "transport": {"type": "http", "endpoint": f"{server.url}/invoke"},
            },
            headers={"Authorization": f"Bearer {keys['bot']}"},
        )
        assert registered.status_code == 201, registered.text
        yield url, keys, agent


def call(url: str, key: str, method: str, path: str, **kwargs: object) -> httpx.Response:
    return httpx.request(
        method, f"{url}{path}", headers={"Authorization": f"Bearer {key}"}, timeout=10, **kwargs
    )


def test_another_caller_can_neither_read_nor_replay_nor_list_a_run(secured):
    url, keys, agent = secured
    steps = [{"id": "s", "action": "echo"}]
    mine = call(url, keys["caller-a"], "POST", "/v1/workflows/run",
                json={"steps": steps, "request_id": "wf-own-1"})  # fmt: skip
    assert mine.status_code == 200, mine.text
    assert mine.json()["status"] == "ok"

    read = call(url, keys["caller-b"], "GET", "/v1/workflows/wf-own-1")
    listed = call(url, keys["caller-b"], "GET", "/v1/workflows")
    theirs = call(url, keys["caller-b"], "POST", "/v1/workflows/run",
                  json={"steps": steps, "request_id": "wf-own-1"})  # fmt: skip
    anonymous = httpx.get(f"{url}/v1/workflows/wf-own-1")

    assert read.status_code == 404
    assert read.json()["error"]["code"] == "unknown_run"
    assert listed.json()["runs"] == []
    assert theirs.status_code == 200
    assert theirs.json()["steps"][0]["status"] == "ok"
    assert len(agent.received) == 2  # B's run is B's own: it executed, A's was not replayed
    assert anonymous.status_code == 401
    assert call(url, keys["caller-a"], "GET", "/v1/workflows/wf-own-1").status_code == 200


def test_a_run_naming_a_capability_the_caller_may_not_invoke_is_refused_before_it_runs(
    secured,
):
    url, keys, agent = secured
    for workflow in (
        {"steps": [{"id": "s", "action": "secret.read"}]},
        {"steps": [{"id": "s", "action": "echo", "fallback": "secret.read"}]},
        {"steps": [{"id": "s", "action": "echo"}], "aggregate": {"capability": "secret.read"}},
    ):
        answer = call(url, keys["caller-a"], "POST", "/v1/workflows/run", json=workflow)

        assert answer.status_code == 403, answer.text
        assert answer.json()["error"]["code"] == "forbidden"
    assert agent.received == []  # not even the step it may invoke ran
    assert call(url, keys["caller-a"], "GET", "/v1/workflows").json()["runs"] == []


def test_an_observer_sees_every_run_but_may_not_run_one(secured):
    url, keys, agent = secured
    mine = call(url, keys["caller-a"], "POST", "/v1/workflows/run",
                json={"steps": [{"id": "s", "action": "echo"}]})  # fmt: skip
    assert mine.status_code == 200, mine.text

    listed = call(url, keys["ops"], "GET", "/v1/workflows")
    run = call(url, keys["ops"], "POST", "/v1/workflows/run",
               json={"steps": [{"id": "s", "action": "echo"}]})  # fmt: skip
    fanout = call(url, keys["ops"], "POST", "/v1/invoke",
                  json={"text": "echo this, and then echo that", "mode": "fanout"})  # fmt: skip

    assert [r["run_id"] for r in listed.json()["runs"]] == [mine.json()["run_id"]]
    assert run.status_code == 403
    assert fanout.status_code == 403, fanout.text
    assert len(agent.received) == 1
