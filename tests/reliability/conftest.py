"""The fault rig: real coordinator and agent processes on 127.0.0.1, and the scenario reports.

Every process a test starts is SIGKILLed and reaped at teardown, whatever the test's
outcome. Each scenario writes `test-artifacts/reliability/<scenario>.json` and its
one-line summary is printed at the end of the run.

    .venv/bin/pytest tests/reliability                          # CI sizes (`small` on the Cluster)
    AR_RELIABILITY_FULL=1 .venv/bin/pytest tests/reliability    # full sizes and `slow` ones
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_reach.clock import SYSTEM_CLOCK
from agent_reach.testing.agent_process import (
    AgentProcess,
    CoordinatorProcess,
    LedgerRow,
    ManagedProcess,
)
from agent_reach.testing.load import Report
from agent_reach.testing.waiting import wait_until

FULL = os.environ.get("AR_RELIABILITY_FULL") == "1"
PROBE_INTERVAL_S = 0.5  # 1 s in production-like runs; halved so CI-sized runs see recoveries
READY_TIMEOUT_S = 60.0  # several interpreters importing at once on a loaded 2-core machine
_SUMMARIES = pytest.StashKey[list[str]]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if FULL:
        return
    here = Path(__file__).parent
    skip = pytest.mark.skip(reason="long fault scenario: set AR_RELIABILITY_FULL=1 to run it")
    for item in items:
        if here in item.path.parents and item.get_closest_marker("slow"):
            item.add_marker(skip)


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_SUMMARIES] = []


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    summaries = config.stash.get(_SUMMARIES, [])
    if summaries:
        terminalreporter.section("reliability figures")
        for line in summaries:
            terminalreporter.write_line(line)


class Timetable:
    """Fault steps at fixed offsets from its creation (a schedule, not a wait for a state)."""

    def __init__(self) -> None:
        self.start = SYSTEM_CLOCK.monotonic()

    def at(self, offset_s: float) -> None:
        """Return once `offset_s` seconds have passed since the start."""
        pause = self.start + offset_s - SYSTEM_CLOCK.monotonic()
        if pause > 0:
            time.sleep(pause)


class Rig:
    """Starts processes in a test's directory and reaps them all at the end."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.processes: list[ManagedProcess] = []
        self.agents: list[AgentProcess] = []

    def coordinator(self, *, policy: str, **options: Any) -> CoordinatorProcess:
        """A started coordinator with this policy (TOML) and fast probes."""
        policy_file = self.directory / f"policy-{len(self.processes)}.toml"
        policy_file.write_text(policy, encoding="utf-8")
        options.setdefault("probe_interval_s", PROBE_INTERVAL_S)
        process = CoordinatorProcess(directory=self.directory, policy_file=policy_file, **options)
        self.processes.append(process)
        self.start(process)  # READY_TIMEOUT_S, not the process kit's 20 s (a busy host took more)
        return process

    def agent(
        self, agent_id: str, capability: str, coordinator: str, **options: Any
    ) -> AgentProcess:
        """An agent process, not started yet (start several at once with `start`)."""
        process = AgentProcess(
            agent_id, capability, coordinator, directory=self.directory, **options
        )
        self.processes.append(process)
        self.agents.append(process)
        return process

    def start(self, *processes: ManagedProcess) -> None:
        """Launch them all, then wait for each to be ready."""
        for process in processes:
            process.launch()
        for process in processes:
            process.wait_ready(READY_TIMEOUT_S)

    def statuses(self, coordinator: str) -> dict[str, str]:
        """Agent id -> status as the coordinator lists it."""
        answer = httpx.get(f"{coordinator}/v1/agents", timeout=2.0)
        answer.raise_for_status()
        return {view["id"]: view["status"] for view in answer.json()["agents"]}

    def wait_healthy(self, coordinator: str, agent_ids: list[str]) -> None:
        """Until the coordinator lists every one of `agent_ids` as healthy."""
        wait_until(
            lambda: all(self.statuses(coordinator).get(a) == "healthy" for a in agent_ids),
            f"{agent_ids} to be healthy at {coordinator}",
            READY_TIMEOUT_S,
        )

    def ledger(self) -> list[LedgerRow]:
        """Every agent's ledger rows, joined."""
        return [row for agent in self.agents for row in agent.ledger()]

    @staticmethod
    def timetable() -> Timetable:
        return Timetable()

    def close(self) -> None:
        for process in self.processes:
            process.kill()


@pytest.fixture
def tier(request: pytest.FixtureRequest) -> str:
    """`full` with AR_RELIABILITY_FULL=1 (nightly sizes), else `smoke` (CI sizes), or
    `small` on the Redis Cluster: the same scenario and gates with fewer requests, so the
    cluster paths run on every change (scenarios marked cluster_smoke keep CI sizes)."""
    if FULL:
        return "full"
    on_cluster = "[redis-cluster" in request.node.name
    if on_cluster and request.node.get_closest_marker("cluster_smoke") is None:
        return "small"
    return "smoke"


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    rig = Rig(tmp_path)
    try:
        yield rig
    finally:
        rig.close()
        _print_tracebacks(tmp_path)


def _print_tracebacks(directory: Path) -> None:
    """Show the processes' tracebacks in the test's output (pytest prints it on failure),
    so a failure in CI says what went wrong inside a coordinator, not only that it did."""
    for log in sorted(directory.glob("*.log")):
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
        starts = [n for n, line in enumerate(lines) if "Traceback" in line][:3]
        for start in starts:
            print(f"--- {log.name}:{start + 1}", *lines[max(0, start - 2) : start + 40], sep="\n")


@pytest.fixture(
    params=[
        "memory",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("redis-cluster", marks=[pytest.mark.redis, pytest.mark.redis_cluster]),
    ]
)
def backend(request: pytest.FixtureRequest) -> dict[str, str]:
    """Coordinator options for each backend; Redis runs under a test-private key prefix."""
    if request.param == "memory":
        return {"backend": "memory"}
    if request.param == "redis-cluster":
        return {
            "backend": "redis-cluster",
            "redis_url": request.getfixturevalue("redis_cluster").url,
            "redis_prefix": request.getfixturevalue("redis_cluster_prefix"),
        }
    return {
        "backend": "redis",
        "redis_url": request.getfixturevalue("redis_url"),
        "redis_prefix": request.getfixturevalue("redis_prefix"),
    }


@pytest.fixture
def report(request: pytest.FixtureRequest) -> Callable[[Report], Report]:
    """Save a scenario's report as JSON and queue its summary line for the end of the run.

    No scenario's agent declares a capability `safe`, so no answer may be `degraded`
    (remembered): every scenario is held to that here, with its figures saved first.
    """
    directory = request.config.rootpath / "test-artifacts" / "reliability"

    def save(result: Report) -> Report:
        result.write(directory)
        request.config.stash[_SUMMARIES].append(result.summary())
        # a Report tallies "200 degraded", the takeover scenario's "capability:degraded:code"
        tally = getattr(result, "codes", None) or getattr(result, "statuses", {})
        remembered = {k: n for k, n in tally.items() if "degraded" in re.split("[ :]", k)}
        assert not remembered, f"{result.scenario}: answered from memory, none declared safe"
        return result

    return save


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("redis-cluster", marks=[pytest.mark.redis, pytest.mark.redis_cluster]),
    ]
)
def store(request: pytest.FixtureRequest) -> dict[str, str]:
    """The store several coordinators share: a standalone Redis or the 6-node Cluster."""
    if request.param == "redis-cluster":
        cluster = request.getfixturevalue("redis_cluster")
        prefix = request.getfixturevalue("redis_cluster_prefix")
        return {"backend": "redis-cluster", "redis_url": cluster.url, "redis_prefix": prefix}
    url, prefix = request.getfixturevalue("redis_url"), request.getfixturevalue("redis_prefix")
    return {"backend": "redis", "redis_url": url, "redis_prefix": prefix}
