"""`agent-reach trace` and `agent-reach top` against a real coordinator and real agents."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator

import httpx
import pytest
from typer.testing import CliRunner, Result

from agent_reach.cli import app
from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator

WIDE = {"COLUMNS": "200"}  # keep Rich from truncating
MAX_BACKGROUND_REQUESTS = 5_000  # the load thread stops by itself even if the test hangs
TOP_WATCHDOG_S = 30.0  # two frames 0.2 s apart take well under a second


@pytest.fixture
def coordinator(fake_agents) -> Iterator[str]:
    """A coordinator where `echo` goes to a failing instance first, then to a working one."""
    _, bad = fake_agents(status=503)
    _, good = fake_agents()
    with run_coordinator(Settings(decision_log="off")) as (url, _):
        for agent_id, endpoint, weight in (("bad-1", bad, 2.0), ("good-1", good, 1.0)):
            registration = {"id": agent_id, "capabilities": ["echo"], "weight": weight}
            httpx.post(
                f"{url}/v1/agents", json={**registration, "transport": {"endpoint": endpoint}}
            )
        yield url


def run(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env=WIDE)


def test_trace_prints_every_hop_as_a_tree_with_timings(coordinator: str) -> None:
    answer = httpx.post(f"{coordinator}/v1/invoke", json={"capability": "echo"}).json()

    result = run("trace", answer["trace_id"], "--coordinator", coordinator)

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert answer["trace_id"] in lines[0] and "fallback" in lines[0]
    hops = [line for line in lines[1:] if "ms" in line]
    assert len(hops) == 4
    assert "invoke" in hops[0] and "→ good-1" in hops[0]
    assert "route" in hops[1] and "rule exact" in hops[1]
    assert "→ bad-1" in hops[2] and "attempt 1" in hops[2] and "agent_error" in hops[2]
    assert "→ good-1" in hops[3] and "attempt 2 (next_instance)" in hops[3]
    assert hops[0].startswith("└") and all(line.startswith("    ") for line in hops[1:])


def test_trace_of_an_unknown_id_is_one_red_line(coordinator: str) -> None:
    result = run("trace", "0" * 31 + "1", "--coordinator", coordinator)
    assert result.exit_code == 1
    assert "unknown_trace" in result.output


def test_top_once_shows_per_capability_traffic(coordinator: str) -> None:
    stop = threading.Event()

    def load() -> None:
        with httpx.Client(base_url=coordinator) as http:
            for _ in range(MAX_BACKGROUND_REQUESTS):
                if stop.is_set():
                    return
                http.post("/v1/invoke", json={"capability": "echo"})
                http.post("/v1/invoke", json={"capability": "nobody.offers"})

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    try:
        result = run("top", "--once", "--interval", "0.5", "--coordinator", coordinator)
    finally:
        stop.set()
        thread.join()

    assert result.exit_code == 0, result.output
    cells = [
        [cell.strip() for cell in line.strip(" │").split("│")]
        for line in result.output.splitlines()
        if "│" in line
    ]
    rows = {row[0]: row[1:] for row in cells}
    requests_per_s, errors_per_s, total, errors, p50, p99 = rows["echo"]
    assert float(requests_per_s) > 0 and float(errors_per_s) == 0
    assert int(total) > 0 and int(errors) == 0
    assert 0 < float(p50) <= float(p99)
    _, missing_errors_per_s, missing_total, missing_errors, _, _ = rows["(unknown)"]
    assert float(missing_errors_per_s) > 0 and int(missing_errors) == int(missing_total) > 0


def test_top_without_a_terminal_prints_a_table_every_interval(coordinator: str) -> None:
    command = [sys.executable, "-m", "agent_reach", "top", "--interval", "0.2"]
    env = {**os.environ, "COLUMNS": "200", "AR_COORDINATOR_URL": coordinator}
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        watchdog = threading.Timer(TOP_WATCHDOG_S, process.kill)  # printing nothing is the bug
        watchdog.start()
        try:
            titles = 0
            while titles < 2:
                line = process.stdout.readline()
                assert line, f"top printed {titles} tables, then ended ({process.wait()})"
                titles += line.startswith(f"traffic at {coordinator}")
        finally:
            watchdog.cancel()
            process.terminate()
