"""A Redis that stalls without closing (`DEBUG SLEEP`, `CLIENT PAUSE ... WRITE`): calls that
need it fail fast, the rest of the coordinator keeps answering, and it heals by itself.

A private redis-server is stalled for STALL_S while the coordinator's store calls time
out after `redis_timeout_s` (0.5 s). While it stalls: an invoke with a request_id (its
claim is a store write) answers 503 `store_unavailable` before Redis wakes up and never
reaches the agent, and reading a context (which renews it) is refused as fast;
`/healthz`, `/metrics` and an instance's view answer. Once Redis answers again, so
does every call, with nothing to restart.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
import redis

from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.redis_server import RedisServer
from agent_reach.testing.waiting import wait_until

pytestmark = pytest.mark.redis

STALL_S = 3.0
TIMEOUT_S = 0.5  # the coordinator's redis_timeout_s


@pytest.fixture
def store() -> Iterator[RedisServer]:
    with RedisServer(options=("--enable-debug-command", "local")) as server:
        yield server


@pytest.fixture
def http(store: RedisServer, coordinator_on) -> Iterator[httpx.Client]:
    with coordinator_on(store, redis_prefix="stall", redis_timeout_s=TIMEOUT_S) as client:
        yield client


def stall(store: RedisServer, *command: str) -> Callable[[], bool]:
    """Send `command` from a client of its own (DEBUG SLEEP blocks it); `asleep()` is
    True until STALL_S after it was sent."""
    sent = time.monotonic()

    def send() -> None:
        with redis.Redis.from_url(store.url, socket_timeout=STALL_S + 5) as client:
            client.execute_command(*command)

    threading.Thread(target=send, daemon=True).start()
    time.sleep(0.1)  # the command reaches Redis before the calls below
    return lambda: time.monotonic() - sent < STALL_S


@pytest.mark.parametrize(
    "command",
    [("DEBUG", "SLEEP", str(STALL_S)), ("CLIENT", "PAUSE", str(int(STALL_S * 1000)), "WRITE")],
    ids=["debug-sleep", "client-pause-write"],
)
def test_a_stalled_store_fails_its_calls_fast_and_the_rest_keeps_answering(
    store: RedisServer,
    http: httpx.Client,
    fake_agents: Callable[..., tuple[FakeAgent, str]],
    command: tuple[str, ...],
) -> None:
    agent, endpoint = fake_agents(name="stall-agent")
    registration = {"id": "s-1", "capabilities": ["stall.act"], "transport": {"endpoint": endpoint}}
    assert http.post("/v1/agents", json=registration).status_code == 201
    context = http.post("/v1/contexts", json={"document": {"order": "A-1"}})
    assert context.status_code == 201
    context_id = context.json()["context_id"]
    invoke = {"capability": "stall.act", "payload": {"n": 1}, "request_id": "stalled-1"}

    asleep = stall(store, *command)
    refused = http.post("/v1/invoke", json=invoke)
    assert asleep(), "the invoke waited for Redis to wake up"
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "store_unavailable"
    assert agent.received == [], "an invoke whose request_id was not claimed reached the agent"
    for path in ("/healthz", "/metrics", "/v1/agents/s-1"):
        assert http.get(path).status_code == 200, path
        assert asleep(), f"GET {path} waited for Redis to wake up"
    # A context read renews the context: a store write too, refused as fast.
    read = http.get(f"/v1/contexts/{context_id}")
    assert asleep(), "reading a context waited for Redis to wake up"
    assert read.status_code == 503, read.text
    assert asleep(), "the checks took longer than the stall: lengthen STALL_S"

    def answered() -> httpx.Response | None:
        response = http.post("/v1/invoke", json=invoke)
        return response if response.status_code == 200 else None

    wait_until(answered, "the invoke to succeed once Redis answers again", timeout_s=10)
    assert len(agent.received) == 1
    assert http.get(f"/v1/contexts/{context_id}").json()["document"] == {"order": "A-1"}
