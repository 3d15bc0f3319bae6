"""Real coordinators (memory and Redis) and real services in other languages on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from peers.foreign import express_service, java_service
from peers.sse_agents import AGENTS


@pytest.fixture(scope="module")
def express_url() -> Iterator[str]:
    with express_service() as url:
        yield url


@pytest.fixture(scope="module")
def java_url() -> Iterator[str]:
    with java_service() as url:
        yield url


@pytest.fixture(scope="module", params=sorted(AGENTS))
def sse_agent(request: pytest.FixtureRequest) -> Iterator[str]:
    """A streaming agent (Starlette, then Node): its base URL."""
    with AGENTS[request.param]() as url:
        yield url
