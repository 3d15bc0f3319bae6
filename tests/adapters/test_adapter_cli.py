"""`agent-reach sidecar --config` as a real process, and `agent-reach agents import-a2a`."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import yaml
from peers.a2a_agents import start_travel_agent
from peers.soap_inventory import soap_service
from test_soap import _sidecar_config
from typer.testing import CliRunner

from agent_reach.cli import app

STARTUP_S = 30.0


def _wait_for(condition: object, what: str) -> None:
    deadline = time.monotonic() + STARTUP_S
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_sidecar_command_registers_serves_and_deregisters(
    http: httpx.Client, coordinator: str, tmp_path: Path
) -> None:
    with soap_service() as (url, ledger):
        config = tmp_path / "sidecar.yaml"
        config.write_text(yaml.safe_dump(_sidecar_config(coordinator, url, "1.1")))
        command = [sys.executable, "-m", "agent_reach", "sidecar", "--config", str(config)]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            _wait_for(lambda: http.get("/v1/agents").json()["agents"], "the sidecar to register")
            answer = http.post(
                "/v1/invoke",
                json={"capability": "erp.inventory.query", "payload": {"sku": "SKU-1"}},
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["result"] == {"in_stock": 7}
        finally:
            process.terminate()
            output = process.communicate(timeout=STARTUP_S)[0]
        # uvicorn re-raises SIGTERM once it has shut down gracefully (lifespan included)
        assert process.returncode in (0, -15), output
        assert b"agent_deregistration_failed" not in output
        assert http.get("/v1/agents").json()["agents"] == []
        assert ledger.calls == ["SKU-1"]


def test_import_a2a_command_registers_the_cards_skills(
    http: httpx.Client, coordinator: str
) -> None:
    server, ledger = start_travel_agent("1.0")
    try:
        result = CliRunner().invoke(
            app, ["agents", "import-a2a", server.url, "--coordinator", coordinator]
        )
        assert result.exit_code == 0, result.output
        assert "weather.forecast" in result.output
        agents = http.get("/v1/agents").json()["agents"]
        assert [a["id"] for a in agents] == [f"a2a-127.0.0.1-{server.port}"]
        answer = http.post(
            "/v1/invoke", json={"text": "will it rain in Hangzhou tomorrow", "payload": None}
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["route"]["capability"] == "weather.forecast"
        assert len(ledger.runs) == 1
    finally:
        server.stop()
