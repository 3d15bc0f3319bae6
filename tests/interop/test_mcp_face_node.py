"""The official TypeScript MCP SDK (`@modelcontextprotocol/sdk` from npm) against `/mcp`.

A client nobody here wrote (peers/mcp_client.mjs) connects with an API key, pings,
lists, and calls tools at once on one session (several concurrent streams): it is shown
exactly the tools its key may call, the others are refused with the unknown-tool error,
and the agent counts one execution per allowed call. Memory and Redis.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from interop_kit import PEERS, need

from agent_reach.config import Settings
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, run_coordinator

ADMIN = "mcp-face-node-admin-key-0123456789"
TAGS = ["inventory.check", "inventory.count", "orders.track", "payroll.run"]
POLICY = '[[access.invoke]]\nprincipals = ["domain:shop"]\ncapabilities = ["orders.*"]\n'
CLIENT_TIMEOUT_S = 60.0


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, FakeAgent]]:
    """A secured coordinator with an agent behind every tag, and a caller key of domain
    shop granted `inventory.*`: (url, key, agent)."""
    if not (PEERS / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail(
            "@modelcontextprotocol/sdk is missing: cd tests/interop/peers && npm install "
            "(scripts/test.sh does)"
        )
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    options: dict[str, Any] = {"auth": "on", "admin_key": ADMIN, "policy_file": policy}
    if request.param == "redis":
        options.update(
            registry_backend="redis",
            redis_url=request.getfixturevalue("redis_url"),
            redis_prefix=request.getfixturevalue("redis_prefix"),
        )
    agent = FakeAgent(answer={"text": "done"})
    with (
        run_coordinator(Settings(**options)) as (url, _),
        ServerThread(agent) as server,
        httpx.Client(base_url=url, headers={"authorization": f"Bearer {ADMIN}"}) as http,
    ):
        for tag in TAGS:
            body = {
                "id": tag.replace(".", "-"),
                "capabilities": [tag],
                "transport": {"type": "http", "endpoint": f"{server.url}/invoke"},
            }
            assert http.post("/v1/agents", json=body).status_code == 201
        grant = {"principal": "shop-app", "domain": "shop", "capabilities": ["inventory.*"]}
        answer = http.post("/v1/keys", json=grant)
        assert answer.status_code == 201, answer.text
        yield url, answer.json()["key"], agent


def run_client(url: str, key: str, tools: list[str]) -> dict[str, Any]:
    """What peers/mcp_client.mjs reports after its session against `url`."""
    finished = subprocess.run(
        [need("node"), "mcp_client.mjs", f"{url}/mcp", key, *tools],
        cwd=PEERS,
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT_S,
        check=False,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    report: dict[str, Any] = json.loads(finished.stdout.strip().splitlines()[-1])
    return report


def test_the_typescript_sdk_sees_and_calls_exactly_its_tools(
    world: tuple[str, str, FakeAgent],
) -> None:
    url, key, agent = world
    report = run_client(url, key, [*TAGS, "no.such.tool"])

    allowed = ["inventory.check", "inventory.count", "orders.track"]
    assert report["protocolVersion"] == "2025-11-25"  # the SDK's latest, echoed
    assert report["sessionId"] and report["server"] == "agent-reach"
    assert report["tools"] == allowed
    for tag in allowed:
        assert report["calls"][tag] == {"isError": False, "structured": {"text": "done"}}
    for tag in ("payroll.run", "no.such.tool"):
        assert report["calls"][tag]["error"]["code"] == -32602
        assert f"Unknown tool: {tag}" in report["calls"][tag]["error"]["message"]
    assert sorted(r.body["payload"]["tag"] for r in agent.received) == allowed
