"""The official MCP conformance suite (`@modelcontextprotocol/conformance` from npm)
against `/mcp`: the scenarios a tools-only server must pass.

initialize, ping, tools/list, several concurrent SSE streams in one session, and
DNS-rebinding protection. The suite connects without credentials, so the coordinator
runs with keys off; the other scenarios need the suite's own test tools, resources and
prompts, which a gateway of live capabilities does not have.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from interop_kit import PEERS, need

from agent_reach.config import Settings
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, run_coordinator

SCENARIOS = [
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
]
SUITE = PEERS / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
RUN_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    """A coordinator (keys off, loopback) with one live capability."""
    if not SUITE.is_file():
        pytest.fail(
            "@modelcontextprotocol/conformance is missing: cd tests/interop/peers && "
            "npm install (scripts/test.sh does)"
        )
    agent = FakeAgent(answer={"text": "done"})
    with run_coordinator(Settings(auth="off")) as (url, _), ServerThread(agent) as server:
        body = {
            "id": "echo-1",
            "capabilities": ["echo.say"],
            "description": "say it back",
            "transport": {"type": "http", "endpoint": f"{server.url}/invoke"},
        }
        assert httpx.post(f"{url}/v1/agents", json=body).status_code == 201
        yield f"{url}/mcp"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_conformance_scenario_passes(mcp_url: str, scenario: str, tmp_path: Path) -> None:
    command = [need("node"), str(SUITE), "server", "--url", mcp_url, "--scenario", scenario]
    finished = subprocess.run(
        [*command, "--output-dir", str(tmp_path)],
        cwd=PEERS,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    checks = [
        check
        for path in tmp_path.glob("*/checks.json")
        for check in json.loads(path.read_text(encoding="utf-8"))
    ]
    assert checks, finished.stdout
    failed = [c for c in checks if c["status"] not in ("SUCCESS", "INFO")]
    assert failed == [], failed
