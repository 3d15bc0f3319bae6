"""Real coordinators (memory and Redis) and real FakeAgent servers on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest

from agent_reach.clock import ManualClock
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread
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
    for server in servers:
        server.stop()


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
