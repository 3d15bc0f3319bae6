"""Every backend behind one `backends` fixture, so each contract test runs on all of them.

Also `timeline`, which lets expiries run out on either backend, and `outage`, a Redis of
the test's own to stop and start under an opened bundle.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from contract_kit import RedisOutage, Timeline

from agent_reach.backends.bundle import Backends
from agent_reach.backends.protocols import RegistryStore
from agent_reach.backends.selection import open_backends
from agent_reach.clock import SYSTEM_CLOCK, Clock, ManualClock
from agent_reach.config import Settings
from agent_reach.testing.redis_server import RedisServer

OUTAGE_TIMEOUT_S = 0.2  # redis_timeout_s for the outage tests
# redis_timeout_s for the contract tests: they are about semantics (admission, listing),
# not latency, so a loaded machine's slow pool must not fail them (the default is 0.5 s).
CONTRACT_TIMEOUT_S = 10.0


@pytest.fixture(
    params=[
        "memory",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("redis-cluster", marks=[pytest.mark.redis, pytest.mark.redis_cluster]),
    ]
)
def backend_name(request: pytest.FixtureRequest) -> str:
    """memory, a standalone Redis, or the session's 6-node Redis Cluster."""
    return str(request.param)


@pytest.fixture
def clock(backend_name: str) -> Clock:
    """Memory leases run on a manual clock; Redis leases are Redis expiry, in real time."""
    return ManualClock() if backend_name == "memory" else SYSTEM_CLOCK


@pytest.fixture
def settings(backend_name: str, request: pytest.FixtureRequest) -> Settings:
    if backend_name == "memory":
        return Settings(registry_backend="memory")
    if backend_name == "redis-cluster":
        return Settings(
            registry_backend="redis",
            redis_cluster=True,
            redis_url=request.getfixturevalue("redis_cluster").url,
            redis_prefix=request.getfixturevalue("redis_cluster_prefix"),
            redis_timeout_s=CONTRACT_TIMEOUT_S,
        )
    return Settings(
        registry_backend=backend_name,
        redis_url=request.getfixturevalue("redis_url"),
        redis_prefix=request.getfixturevalue("redis_prefix"),
        redis_timeout_s=CONTRACT_TIMEOUT_S,
    )


@pytest.fixture
async def backends(settings: Settings, clock: Clock) -> AsyncIterator[Backends]:
    """The backend under test, opened by name as the coordinator opens it."""
    opened = await open_backends(settings, clock)
    yield opened
    await opened.aclose()


@pytest.fixture
def store(backends: Backends) -> RegistryStore:
    return backends.registry


@pytest.fixture
def timeline(clock: Clock) -> Timeline:
    return Timeline(clock)


@pytest.fixture
async def outage() -> AsyncIterator[RedisOutage]:
    """A private Redis, with a short store timeout, and a bundle opened on it."""
    with RedisServer() as server:
        settings = Settings(
            registry_backend="redis",
            redis_url=server.url,
            redis_prefix="outage",
            redis_timeout_s=OUTAGE_TIMEOUT_S,
        )
        opened = await open_backends(settings, SYSTEM_CLOCK)
        yield RedisOutage(server, settings, opened)
        await opened.aclose()
