"""A Redis that stalls without closing (frozen, or `CLIENT PAUSE ... WRITE`): calls that
need it fail fast, the rest of the coordinator keeps answering, and it heals by itself.

A private redis-server stalls for as long as the test holds it (SIGSTOP until SIGCONT,
or a pause until `CLIENT UNPAUSE`) while the coordinator's store calls time out after
`redis_timeout_s` (0.5 s). While it stalls: an invoke with a request_id (its claim is a
store write) answers 503 `store_unavailable` and never reaches the agent, and reading
a context (which renews it) is refused as fast; `/healthz`, `/metrics` and an instance's
view answer. Each answer comes while the stall still holds (it is only lifted after
the checks), within ANSWER_BOUND_S. Once Redis answers again, so does every call, with
nothing to restart.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import redis
from structlog.testing import capture_logs

from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.redis_server import RedisServer
from agent_reach.testing.waiting import wait_until

pytestmark = pytest.mark.redis

TIMEOUT_S = 0.5  # the coordinator's redis_timeout_s
ANSWER_BOUND_S = 10 * TIMEOUT_S  # a call that waited for Redis would never answer: the bound
PAUSE_MS = 120_000  # longer than any test: `CLIENT UNPAUSE` ends it


@pytest.fixture
def store() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture
def http(store: RedisServer, coordinator_on) -> Iterator[httpx.Client]:
    with coordinator_on(store, redis_prefix="stall", redis_timeout_s=TIMEOUT_S) as client:
        yield client


@contextmanager
def stalled(store: RedisServer, how: str) -> Iterator[None]:
    """Redis stalls from entry (in effect when this returns) until exit."""
    if how == "frozen":
        store.pause()  # returns once the process is stopped
        try:
            yield
        finally:
            store.resume()
        return
    with redis.Redis.from_url(store.url) as client:
        assert client.execute_command("CLIENT", "PAUSE", str(PAUSE_MS), "WRITE")
        try:
            yield
        finally:
            client.execute_command("CLIENT", "UNPAUSE")


@pytest.mark.parametrize("how", ["frozen", "client-pause-write"])
def test_a_stalled_store_fails_its_calls_fast_and_the_rest_keeps_answering(
    store: RedisServer,
    http: httpx.Client,
    fake_agents: Callable[..., tuple[FakeAgent, str]],
    how: str,
) -> None:
    agent, endpoint = fake_agents(name="stall-agent")
    registration = {"id": "s-1", "capabilities": ["stall.act"], "transport": {"endpoint": endpoint}}
    assert http.post("/v1/agents", json=registration).status_code == 201
    context = http.post("/v1/contexts", json={"document": {"order": "A-1"}})
    assert context.status_code == 201
    context_id = context.json()["context_id"]
    invoke = {"capability": "stall.act", "payload": {"n": 1}, "request_id": "stalled-1"}

    with stalled(store, how):
        refused = http.post("/v1/invoke", json=invoke, timeout=ANSWER_BOUND_S)
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "store_unavailable"
        assert agent.received == [], "an invoke whose request_id was not claimed reached the agent"
        for path in ("/healthz", "/metrics", "/v1/agents/s-1"):
            assert http.get(path, timeout=ANSWER_BOUND_S).status_code == 200, path
        # A context read renews the context: a store write too, refused as fast.
        read = http.get(f"/v1/contexts/{context_id}", timeout=ANSWER_BOUND_S)
        assert read.status_code == 503, read.text

    def answered() -> httpx.Response | None:
        response = http.post("/v1/invoke", json=invoke)
        return response if response.status_code == 200 else None

    wait_until(answered, "the invoke to succeed once Redis answers again", timeout_s=10)
    assert len(agent.received) == 1
    assert http.get(f"/v1/contexts/{context_id}").json()["document"] == {"order": "A-1"}


def test_a_redis_that_answers_late_at_start_is_waited_for(
    store: RedisServer, coordinator_on: Callable[..., Any]
) -> None:
    """A coordinator starting while Redis stalls asks again (a slow answer is not a
    refusal) and serves once Redis answers, within its startup patience."""
    started: list[int] = []

    def start() -> None:
        with coordinator_on(store, redis_prefix="late", redis_timeout_s=TIMEOUT_S) as http:
            started.append(http.get("/healthz").status_code)

    store.pause()
    try:
        with capture_logs() as logged:
            starting = threading.Thread(target=start)
            starting.start()
            wait_until(
                lambda: any(e["event"] == "redis_slow_at_start" for e in logged),
                "a first PING to time out",
            )
    finally:
        store.resume()
    starting.join(30)
    assert started == [200]
