"""Peers nobody here wrote: agents on Node, Java, Python's http.server (1.0 and 1.1),
aiohttp and uvicorn, and callers on urllib, curl, httpx and the JDK's HttpClient,
against one real coordinator on 127.0.0.1.

Each agent peer is its own process (`peers/`), serves every answer shape by path and
counts what it acted on (`GET /stats`). Node and Java come from Debian (`nodejs`,
`default-jdk-headless`); scripts/test.sh installs them on a fresh machine.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from itertools import count

import httpx
import pytest
from interop_kit import BODY_LIMIT, Peer, need, start_peer

from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator

PEER_COMMANDS: dict[str, Callable[[], list[str]]] = {
    "node": lambda: [need("node"), "agent.js", "5000"],
    "java": lambda: [need("java"), "Agent.java"],
    "http.server-1.0": lambda: [sys.executable, "stdlib_agent.py", "1.0"],
    "http.server-1.1": lambda: [sys.executable, "stdlib_agent.py", "1.1"],
    "aiohttp": lambda: [sys.executable, "aiohttp_agent.py"],
    "uvicorn": lambda: [sys.executable, "uvicorn_agent.py"],
    "raw": lambda: [sys.executable, "raw_agent.py"],
    "node-short-idle": lambda: [need("node"), "agent.js", "100"],
}


@pytest.fixture(scope="session")
def peers() -> Iterator[Callable[[str], Peer]]:
    """`peers(name)`: that peer, started once for the whole session."""
    started: dict[str, Peer] = {}

    def get(name: str) -> Peer:
        if name not in started:
            started[name] = start_peer(name, PEER_COMMANDS[name]())
        return started[name]

    yield get
    for peer in started.values():
        peer.process.kill()
        peer.process.wait()


@pytest.fixture(scope="session")
def coordinator() -> Iterator[str]:
    """One coordinator (memory backend, decision log and tracing on) for the suite."""
    with run_coordinator(Settings(auth="off", max_body_bytes=BODY_LIMIT)) as (url, _):
        yield url


@pytest.fixture(scope="session")
def api(coordinator: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=coordinator, timeout=30) as client:
        yield client


_names = count()


@pytest.fixture
def capability_at(api: httpx.Client) -> Callable[[str, int], str]:
    """`capability_at(endpoint, instances)`: a fresh capability served by `instances`
    registrations of the same endpoint (so the peer counts every instance's work)."""

    def register(endpoint: str, instances: int = 2) -> str:
        capability = f"interop.c{next(_names)}"
        for n in range(instances):
            body = {
                "id": f"{capability.replace('.', '-')}-{n}",
                "capabilities": [capability],
                "transport": {"type": "http", "endpoint": endpoint},
            }
            assert api.post("/v1/agents", json=body).status_code == 201
        return capability

    return register
