"""Fixtures every test directory shares: a real Redis (standalone and Cluster) with private
key prefixes, and a real coordinator on each backend with an HTTP client for it."""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from collections.abc import Iterator

import httpx
import hypothesis
import pytest
import redis
import structlog

from agent_reach.config import Settings
from agent_reach.testing.ports import refused_port
from agent_reach.testing.redis_cluster import RedisClusterServer
from agent_reach.testing.redis_server import RedisServer, find_redis_url
from agent_reach.testing.servers import run_coordinator

# Coordinators in tests run without API keys unless a test turns security on itself
# (tests/security does); child processes (tests/reliability) inherit this.
os.environ.setdefault("AR_AUTH", "off")

# Property tests check behaviour, not speed: Hypothesis's default 200 ms deadline per
# example fails them on a loaded host, so there is none.
hypothesis.settings.register_profile("agent-reach", deadline=None)
hypothesis.settings.load_profile("agent-reach")


def pytest_configure(config: pytest.Config) -> None:
    """Coordinators in the test process log to stderr, as `agent-reach serve` does.

    structlog's default writes to whatever `sys.stdout` is at the moment, which inside
    a CliRunner is the command's output: a CLI test would read a coordinator's log line.
    """
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))


REDIS_MISSING = (
    "the Redis tests need a real Redis: install it (apt-get install redis-server, "
    "brew install redis) or point AR_TEST_REDIS_URL at a running one"
)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A Redis every test may use: AR_TEST_REDIS_URL, a local one, or a private server."""
    url = find_redis_url()
    if url is not None:
        yield url
        return
    if shutil.which("redis-server") is None:
        pytest.fail(REDIS_MISSING)
    with RedisServer() as server:
        yield server.url


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A key prefix no other test uses; its keys are deleted afterwards."""
    prefix = f"test-{secrets.token_hex(6)}"
    yield prefix
    with redis.Redis.from_url(redis_url) as client:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            client.unlink(*keys)


@pytest.fixture
def dead_port() -> Iterator[int]:
    """A loopback port that refuses connections for the whole test (held, not listened on:
    unlike a port found free and let go, no other process can start serving on it)."""
    with refused_port() as port:
        yield port


@pytest.fixture(params=["memory", "redis"])
def settings(request: pytest.FixtureRequest) -> Settings:
    """Coordinator settings for each backend; Redis runs under a test-private key prefix."""
    if request.param == "memory":
        return Settings(decision_log="off")
    return Settings(
        decision_log="off",
        registry_backend="redis",
        redis_url=request.getfixturevalue("redis_url"),
        redis_prefix=request.getfixturevalue("redis_prefix"),
    )


@pytest.fixture
def coordinator(settings: Settings) -> Iterator[str]:
    with run_coordinator(settings) as (url, _):
        yield url


@pytest.fixture
def http(coordinator: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=coordinator, timeout=10) as client:
        yield client


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisClusterServer]:
    """A 3-master, 3-replica Redis Cluster on loopback, started once per session.

    Tests that fail a node over must leave it with 3 masters serving every slot again.
    """
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.fail(REDIS_MISSING)
    with RedisClusterServer() as cluster:
        yield cluster


@pytest.fixture
def redis_cluster_prefix(redis_cluster: RedisClusterServer) -> Iterator[str]:
    """A key prefix of the cluster no other test uses; its keys are deleted afterwards."""
    prefix = f"test-{secrets.token_hex(6)}"
    yield prefix
    redis_cluster.wait_until_ok()
    with redis.RedisCluster.from_url(redis_cluster.url) as client:
        for key in list(client.scan_iter(match=f"{prefix}:*", count=1000)):
            client.unlink(key)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the browser tests last: Playwright's sync API leaves an event loop set on the
    main thread, which the async tests that would follow them cannot start under."""
    items.sort(key=lambda item: item.path.parent.name == "browser")  # stable: order kept
