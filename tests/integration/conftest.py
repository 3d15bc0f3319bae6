"""Real coordinators (memory and Redis) and real FakeAgent servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from agent_reach.clock import ManualClock
from agent_reach.config import Settings
from agent_reach.testing.fake_agent import FakeAgent, Scope
from agent_reach.testing.redis_server import RedisServer
from agent_reach.testing.servers import ServerThread, run_coordinator, stop_all
from agent_reach.testing.waiting import wait_until


@pytest.fixture
def manual_clock() -> ManualClock:
    return ManualClock()


AgentFactory = Callable[..., tuple[FakeAgent, str]]


@pytest.fixture
def fake_agents() -> Iterator[AgentFactory]:
    """Start FakeAgents on demand: `agent, endpoint = fake_agents(name="a", status=200)`."""
    servers: list[ServerThread] = []

    def start(**knobs: object) -> tuple[FakeAgent, str]:
        agent = FakeAgent(**knobs)  # type: ignore[arg-type]
        server = ServerThread(agent).start()
        servers.append(server)
        return agent, f"{server.url}/invoke"

    yield start
    stop_all(servers)


GATE_S = 10.0  # a gate the test never opens ends the agent's wait, failing the test


class GatedAgent(FakeAgent):
    """A FakeAgent whose answers wait until the test opens `gate` (at most GATE_S): a
    request is held exactly as long as the test needs it in flight, not a guessed delay."""

    def __init__(self, **knobs: Any) -> None:
        super().__init__(**knobs)
        self.gate = threading.Event()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        async def gated(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and scope.get("method") == "POST":
                await asyncio.to_thread(self.gate.wait, GATE_S)
            await send(message)

        await FakeAgent.__call__(self, scope, receive, gated)


GatedFactory = Callable[..., tuple[GatedAgent, str]]


@pytest.fixture
def gated_agents() -> Iterator[GatedFactory]:
    """Start GatedAgents, gate closed: `agent, endpoint = gated_agents()`; `agent.gate.set()`
    lets its answers go (every gate is opened at teardown, so no server waits on one)."""
    started: list[tuple[GatedAgent, ServerThread]] = []

    def start(**knobs: object) -> tuple[GatedAgent, str]:
        agent = GatedAgent(**knobs)
        server = ServerThread(agent).start()
        started.append((agent, server))
        return agent, f"{server.url}/invoke"

    yield start
    for agent, _ in started:
        agent.gate.set()
    stop_all([server for _, server in started])


@pytest.fixture
def register(http: httpx.Client) -> Callable[..., httpx.Response]:
    """Register an instance: `register("a-1", endpoint, "cap.one", ttl=5)` -> the response."""

    def call(agent_id: str, endpoint: str, *capabilities: str, **extra: object) -> httpx.Response:
        body = {
            "id": agent_id,
            "capabilities": list(capabilities) or ["echo"],
            "transport": {"type": "http", "endpoint": endpoint},
            **extra,
        }
        return http.post("/v1/agents", json=body)

    return call


@pytest.fixture
def matching_ready(http: httpx.Client) -> Callable[[], dict[str, object]]:
    """Wait until every text matcher of the policy is fitted and calibrated on the current
    catalog (the encoder loads and fits in the background); returns the matching status."""

    def wait() -> dict[str, object]:
        def current() -> dict[str, object] | None:
            matching = http.get("/v1/policy").json()["matching"]
            return matching if matching["current"] else None

        return wait_until(current, "the text matchers to fit the catalog", timeout_s=30)

    return wait


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("redis-cluster", marks=[pytest.mark.redis, pytest.mark.redis_cluster]),
    ]
)
def shared(request: pytest.FixtureRequest) -> Settings:
    """Settings of coordinators sharing one store: a standalone Redis, then a Cluster."""
    if request.param == "redis-cluster":
        return Settings(
            decision_log="off",
            registry_backend="redis",
            redis_cluster=True,
            redis_url=request.getfixturevalue("redis_cluster").url,
            redis_prefix=request.getfixturevalue("redis_cluster_prefix"),
        )
    return Settings(
        decision_log="off",
        registry_backend="redis",
        redis_url=request.getfixturevalue("redis_url"),
        redis_prefix=request.getfixturevalue("redis_prefix"),
    )


@contextlib.contextmanager
def _coordinator_on(server: RedisServer, **settings: Any) -> Iterator[httpx.Client]:
    on_redis = Settings(
        decision_log="off", registry_backend="redis", redis_url=server.url, **settings
    )
    with run_coordinator(on_redis) as (url, _), httpx.Client(base_url=url, timeout=10) as client:
        yield client


@pytest.fixture
def coordinator_on() -> Callable[..., contextlib.AbstractContextManager[httpx.Client]]:
    """A coordinator on a test's own redis-server (one it may fill or stall), as a client:
    `with coordinator_on(server, redis_prefix="p") as http: ...`."""
    return _coordinator_on
