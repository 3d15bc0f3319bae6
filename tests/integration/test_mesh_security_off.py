"""With security off (AR_AUTH=off) a delegation token is still honored: a call made with
one acts through its chain and stays within the delegate rules (a chain only narrows)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_reach import Agent, AgentRequest, ReachError, Settings
from agent_reach.testing.servers import ServerThread, run_coordinator, stop_all
from agent_reach.testing.waiting import wait_until

POLICY = """
[[access.delegate]]
principals = ["name:front"]
capabilities = ["work.*"]
"""


@pytest.fixture
def coordinator(tmp_path: Path) -> Iterator[str]:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    settings = Settings(auth="off", policy_file=policy, decision_log="off")
    with run_coordinator(settings) as (url, _):
        front = Agent("front", ["front.ask"], coordinator_url=url)
        worker = Agent("worker", ["work.do", "other.do"], coordinator_url=url, delegation=True)

        @front.handler
        async def ask(request: AgentRequest) -> dict[str, Any]:
            try:
                handed = await request.delegate(request.payload["capability"], payload={})
            except ReachError as exc:
                return {"refused": exc.code, "failed": exc.details.get("failed")}
            return {"then": handed.result}

        @worker.handler
        async def work(request: AgentRequest) -> dict[str, Any]:
            assert request.delegation is not None
            return {"depth": request.delegation["depth"]}

        servers = []
        for agent in (front, worker):
            server = ServerThread(agent.app)
            agent.endpoint_url = f"{server.url}/invoke"
            servers.append(server.start())
        try:
            wait_until(
                lambda: len(httpx.get(f"{url}/v1/agents").json()["agents"]) == 2, "the agents"
            )
            yield url
        finally:
            stop_all(servers)


def ask(url: str, capability: str) -> dict[str, Any]:
    body = {"capability": "front.ask", "payload": {"capability": capability}}
    answer = httpx.post(f"{url}/v1/invoke", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    return result


def test_a_delegation_token_is_honored_with_security_off(coordinator: str) -> None:
    assert ask(coordinator, "work.do") == {"then": {"depth": 2}}  # through front, then worker
    # No rule lets front hand other.do on: refused, although every caller is an admin.
    assert ask(coordinator, "other.do") == {
        "refused": "delegation_denied",
        "failed": "delegate_rule",
    }
