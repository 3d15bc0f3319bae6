"""The attack rig: secured coordinators on both backends, agents on 127.77.0.0/16, reports.

Each scenario keeps an `AttackReport` of what it tried and what got through; reports are
written to `test-artifacts/security/<name>-<backend>.json` and their one-line summaries
printed at the end of the run.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from attack_kit import (
    ALLOWED_NETWORK,
    CAPABILITY_1,
    CAPABILITY_2,
    CAST,
    METRICS_TOKEN,
    POLICY,
    AgentFactory,
    AttackReport,
    Deployment,
    ReportFactory,
    RunningAgent,
    World,
    registration,
    stop_all,
)
from pydantic import SecretStr

from agent_reach.config import Settings
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread

_AGENT_HOSTS = itertools.cycle(f"127.77.0.{n}" for n in range(11, 250))
_SUMMARIES = pytest.StashKey[list[str]]()
_CALL_FAILED = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_SUMMARIES] = []


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    summaries = config.stash.get(_SUMMARIES, [])
    if summaries:
        terminalreporter.section("security figures (got through must be 0)")
        for line in summaries:
            terminalreporter.write_line(line)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def backend(request: pytest.FixtureRequest) -> str:
    """Each scenario runs on both backends; Redis under a test-private key prefix."""
    return str(request.param)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Remember whether a test's own body failed (the `report` fixture then says nothing)."""
    outcome = yield
    if outcome.when == "call":
        item.stash[_CALL_FAILED] = outcome.failed
    return outcome


@pytest.fixture
def report(request: pytest.FixtureRequest, backend: str) -> Iterator[ReportFactory]:
    """`report("access_matrix", "S4 access matrix")`: saved and summarized at teardown.

    A test that records attempts must judge them (`assert_nothing_got_through`): one
    that forgets fails here, at teardown, rather than passing whatever got through."""
    made: list[AttackReport] = []

    def make(name: str, scenario: str) -> AttackReport:
        made.append(AttackReport(name, scenario, backend))
        return made[-1]

    yield make
    directory = request.config.rootpath / "test-artifacts" / "security"
    for attack in made:
        attack.write(directory)
        request.config.stash[_SUMMARIES].append(attack.summary())
    unjudged = [a.name for a in made if a.tried and not a.checked]
    if unjudged and not request.node.stash.get(_CALL_FAILED, False):
        pytest.fail(
            f"attack report(s) {', '.join(unjudged)} recorded attempts that the test never "
            "judged: call assert_nothing_got_through()",
            pytrace=False,
        )


@pytest.fixture
def start_agent() -> Iterator[AgentFactory]:
    """`start_agent(status=307, ...)`: a FakeAgent with these knobs on the next 127.77.0.x."""
    running: list[RunningAgent] = []

    def start(**knobs: Any) -> RunningAgent:
        server = ServerThread(FakeAgent(**knobs), host=next(_AGENT_HOSTS)).start()
        running.append(RunningAgent(server.app, server))
        return running[-1]

    yield start
    stop_all([agent.server for agent in running])


@pytest.fixture
def admin_key() -> str:
    """A fresh AR_ADMIN_KEY per test, so a grep for it finds only this test's traces."""
    return secrets.token_urlsafe(32)


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    """`POLICY` as a file, as coordinators read it."""
    path = tmp_path / "policy.toml"
    path.write_text(POLICY, encoding="utf-8")
    return path


@pytest.fixture
def redis_options(request: pytest.FixtureRequest, backend: str) -> dict[str, str]:
    """The Redis URL and a test-private key prefix on Redis; nothing on memory."""
    if backend == "memory":
        return {}
    return {
        "redis_url": request.getfixturevalue("redis_url"),
        "redis_prefix": request.getfixturevalue("redis_prefix"),
    }


@pytest.fixture
def deployment(
    backend: str,
    admin_key: str,
    policy_file: Path,
    redis_options: dict[str, str],
    tmp_path: Path,
) -> Iterator[Deployment]:
    """Secured coordinator(s) on `backend`; a second one starts on demand."""

    def settings() -> Settings:
        # A new object per coordinator: startup drops the admin key it was given.
        return Settings(
            auth="on",
            admin_key=SecretStr(admin_key),
            endpoint_allow=[ALLOWED_NETWORK],
            policy_file=policy_file,
            metrics_token=SecretStr(METRICS_TOKEN),
            decision_log=str(tmp_path / "decisions.log"),
            registry_backend=backend,
            **redis_options,
        )

    deployed = Deployment(backend, settings)
    try:
        yield deployed
    finally:
        deployed.close()


@pytest.fixture
def world(deployment: Deployment, admin_key: str, start_agent: AgentFactory) -> World:
    """`deployment` with the cast's keys minted and agents X and Y registered."""
    keys = {"admin": admin_key, "scraper": METRICS_TOKEN}
    for principal, (domain, role) in CAST.items():
        keys[principal] = deployment.mint(admin_key, principal, domain, role)["key"]
    x, y = start_agent(name="x"), start_agent(name="y")
    for principal, agent_id, agent, capability in (
        ("agent-x", "x-1", x, CAPABILITY_1),
        ("agent-y", "y-1", y, CAPABILITY_2),
    ):
        answer = deployment.register(
            keys[principal], registration(agent_id, agent.endpoint, capability)
        )
        assert answer.status_code == 201, answer.text
    return World(deployment, keys, x, y)
