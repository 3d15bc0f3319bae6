"""A stdio MCP server (the official Python SDK's) behind `agent-reach sidecar`, a real
child process, registered with a real coordinator (memory and Redis)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_reach.config import Settings
from agent_reach.testing.processes import ChildProcess
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_until

PEERS = Path(__file__).parent / "peers"
CLI = Path(sys.executable).parent / "agent-reach"


def executions(ledger: Path) -> list[str]:
    if not ledger.exists():
        return []
    return [line.split(" ", 1)[0] for line in ledger.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def sidecar(settings: Settings, tmp_path: Path) -> Iterator[tuple[httpx.Client, Path]]:
    """A coordinator, and the sidecar running the stdio server registered with it."""
    ledger = tmp_path / "ledger.txt"
    fast = settings.model_copy(update={"probe_interval_s": 0.2})
    with run_coordinator(fast) as (url, _), httpx.Client(base_url=url, timeout=10) as http:
        config = {
            "coordinator": url,
            "agent": {"id": "desk", "ttl": 30},
            "mcp_stdio": {
                "command": sys.executable,
                "args": [str(PEERS / "mcp_stdio_server.py"), str(ledger)],
            },
            "tools": {"echo": "desk.repeat"},
        }
        path = tmp_path / "sidecar.yaml"
        path.write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML
        process = ChildProcess()
        process.spawn([str(CLI), "sidecar", "--config", str(path)], output=subprocess.DEVNULL)
        try:
            wait_until(
                lambda: http.get("/v1/agents/desk").status_code == 200,
                "the sidecar to register the stdio server",
                30,
            )
            yield http, ledger
        finally:
            process.stop()


def test_a_stdio_server_behind_the_sidecar_is_an_agent(
    sidecar: tuple[httpx.Client, Path],
) -> None:
    http, ledger = sidecar
    view = http.get("/v1/agents/desk").json()
    assert sorted(view["capabilities"]) == ["desk.charge", "desk.grow", "desk.repeat"]
    assert view["transport"]["type"] == "mcp"
    wait_until(lambda: http.get("/v1/agents/desk").json()["status"] == "healthy", "a ping")
    answer = http.post(
        "/v1/invoke", json={"capability": "desk.repeat", "payload": {"sentence": "hi"}}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"] == {"text": "you said: hi"}

    grown = http.post("/v1/invoke", json={"capability": "desk.grow", "payload": {}})
    assert grown.status_code == 200, grown.text
    wait_until(
        lambda: "desk.translate" in http.get("/v1/agents/desk").json()["capabilities"],
        "the stdio server's new tool to be a capability",
    )
    shout = http.post(
        "/v1/invoke", json={"capability": "desk.translate", "payload": {"sentence": "hi"}}
    )
    assert shout.json()["result"] == {"text": "HI"}, shout.text
    assert executions(ledger) == ["echo", "grow", "translate"]


def test_a_call_lost_with_the_stdio_server_is_not_sent_again(
    sidecar: tuple[httpx.Client, Path],
) -> None:
    http, ledger = sidecar
    lost = http.post(
        "/v1/invoke",
        json={"capability": "desk.charge", "payload": {"amount": 5}, "timeout_class": "reasoning"},
    )
    assert lost.status_code == 502, lost.text
    assert len(lost.json()["error"]["attempts"]) == 1
    assert executions(ledger) == ["charge"]

    def echoed() -> bool:  # the sidecar starts the server again
        answer = http.post(
            "/v1/invoke", json={"capability": "desk.repeat", "payload": {"sentence": "again"}}
        )
        return answer.status_code == 200

    wait_until(echoed, "the restarted stdio server to answer", 30)
    assert executions(ledger).count("charge") == 1
