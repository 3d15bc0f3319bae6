"""A Redis out of memory (`maxmemory`, `noeviction`): writes refused, nothing lost or half-written.

A private redis-server with a small `maxmemory` is filled with contexts through the
API until it refuses one. Its limit is then lowered below what it uses (a refusal
leaves some room, which a smaller write could take), and every write the API makes
answers 507
`store_full`, readable by a plain client; what was stored before reads back unchanged;
a refused write leaves nothing half-written (a key minted while full is not listed, a
context patched while full keeps its version); an invoke whose request_id cannot be
claimed never reaches the agent. Deleting contexts frees room, and writes work again.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import redis

from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.redis_server import RedisServer

pytestmark = pytest.mark.redis

MAXMEMORY = "3mb"  # an empty redis-server uses about 0.9 MB
FILLER = "y" * 20_000
MAX_FILLERS = 1_000  # 20 MB: far beyond the limit, so the loop always ends on a refusal


@pytest.fixture
def full_store() -> Iterator[RedisServer]:
    options = ("--maxmemory", MAXMEMORY, "--maxmemory-policy", "noeviction")
    with RedisServer(options=options) as server:
        yield server


@pytest.fixture
def http(full_store: RedisServer, coordinator_on) -> Iterator[httpx.Client]:
    with coordinator_on(full_store, redis_prefix="full") as client:
        yield client


def plain_call(base_url: str, method: str, path: str, body: Any) -> tuple[int, dict[str, Any]]:
    """The call as Python's urllib makes it: status and decoded error body."""
    request = urllib.request.Request(  # noqa: S310 - a loopback http URL
        f"{base_url}{path}",
        data=json.dumps(body).encode(),
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def fill(http: httpx.Client) -> list[str]:
    """Create contexts until the store refuses one; their ids."""
    created = []
    for i in range(MAX_FILLERS):
        response = http.post("/v1/contexts", json={"document": {"blob": FILLER, "i": i}})
        if response.status_code != 201:
            assert_full(response.status_code, response.json())
            return created
        created.append(response.json()["context_id"])
    pytest.fail(f"{MAX_FILLERS} contexts of 20 KB fitted into maxmemory {MAXMEMORY}")


def assert_full(status: int, body: dict[str, Any]) -> None:
    assert status == 507, body
    assert body["error"]["code"] == "store_full", body
    assert "out of memory" in body["error"]["message"]


def test_a_full_store_refuses_writes_with_507_and_loses_nothing(
    full_store: RedisServer, http: httpx.Client, fake_agents: Callable[..., tuple[FakeAgent, str]]
) -> None:
    agent, endpoint = fake_agents(name="store-agent")
    registered = http.post(
        "/v1/agents",
        json={"id": "store-1", "capabilities": ["store.act"], "transport": {"endpoint": endpoint}},
    )
    assert registered.status_code == 201, registered.text
    kept = http.post("/v1/contexts", json={"document": {"order": "A-1", "items": [1, 2]}})
    assert kept.status_code == 201, kept.text
    kept_id = kept.json()["context_id"]
    before = http.get(f"/v1/contexts/{kept_id}").json()
    minted = http.post("/v1/keys", json={"principal": "early", "role": "caller"})
    assert minted.status_code == 201, minted.text
    keys_before = http.get("/v1/keys").json()

    fillers = fill(http)
    assert fillers, "the store refused the first context: raise MAXMEMORY"
    with redis.Redis.from_url(full_store.url) as store:
        used = int(store.info("memory")["used_memory"])
        store.config_set("maxmemory", used // 2)

    # Writes are refused, and say why to a plain client.
    base = str(http.base_url).rstrip("/")
    assert_full(*plain_call(base, "POST", "/v1/contexts", {"document": {"blob": FILLER}}))
    patch = {"merge": {"more": FILLER}}
    assert_full(*plain_call(base, "PATCH", f"/v1/contexts/{kept_id}", patch))
    assert_full(*plain_call(base, "POST", "/v1/keys", {"principal": "late", "role": "caller"}))
    invoke = {"capability": "store.act", "payload": {"n": 1}, "request_id": "full-1"}
    assert_full(*plain_call(base, "POST", "/v1/invoke", invoke))
    assert agent.received == [], "an invoke whose request_id was not claimed reached the agent"

    # What was stored before reads back unchanged; nothing refused is half there.
    assert http.get(f"/v1/contexts/{kept_id}").json() == before
    assert http.get("/v1/keys").json() == keys_before
    assert [a["id"] for a in http.get("/v1/agents").json()["agents"]] == ["store-1"]

    # Room made by deletions: writes work again.
    for context_id in fillers:
        assert http.delete(f"/v1/contexts/{context_id}").status_code == 204
    with redis.Redis.from_url(full_store.url) as store:
        store.config_set("maxmemory", MAXMEMORY)
    assert http.patch(f"/v1/contexts/{kept_id}", json=patch).status_code == 200
    assert http.post("/v1/keys", json={"principal": "late", "role": "caller"}).status_code == 201
    answered = http.post("/v1/invoke", json=invoke)
    assert answered.status_code == 200, answered.text
    assert len(agent.received) == 1
