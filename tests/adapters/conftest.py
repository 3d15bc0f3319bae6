"""Real coordinators (memory and Redis) and real services in other languages on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from peers.foreign import express_service, java_service

from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator


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


@pytest.fixture(scope="module")
def express_url() -> Iterator[str]:
    with express_service() as url:
        yield url


@pytest.fixture(scope="module")
def java_url() -> Iterator[str]:
    with java_service() as url:
        yield url
