"""A mesh agent in Node, on the TypeScript SDK (peers/mesh_agent.mjs, clients/typescript).

caller -> cs-bot (Python SDK) -> the Node agent -> locator (Python SDK). The Node agent
verifies its delivery's delegation token with the coordinators' JWKS, reads on whose
behalf and through whom it comes, and delegates onward with that token as its only
credential; it refuses a tampered token. On memory with one coordinator, and on Redis
with two (the caller on one, the agents on the other).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from interop_kit import PEERS, Peer, need, start_peer

from agent_reach import Agent, AgentRequest, DelegationVerifier, ReachError, Settings
from agent_reach.testing.servers import ServerThread, run_coordinator, stop_all
from agent_reach.testing.waiting import wait_until

ADMIN = "mesh-node-agent-admin-key-0123456789"
POLICY = """
[[access.delegate]]
principals = ["name:cs-agents"]
capabilities = ["specialist.*"]

[[access.delegate]]
principals = ["name:specialist-agents"]
capabilities = ["logistics.*"]
"""
CHAIN = [
    {"agent": "cs-agents", "instance": "cs-bot", "capability": "cs.answer"},
    {"agent": "specialist-agents", "instance": "node-specialist", "capability": "specialist.ask"},
]


class World:
    """The coordinators, the keys, and the Node agent."""

    def __init__(self, caller_url: str, agents_url: str, admin: httpx.Client) -> None:
        self.caller_url = caller_url
        self.agents_url = agents_url
        self.admin = admin
        self.keys: dict[str, str] = {}
        self.tokens: list[str] = []  # the tokens cs-bot was delivered
        self.node: Peer | None = None

    def key(self, principal: str, role: str, grants: list[str]) -> str:
        body = {"principal": principal, "role": role, "capabilities": grants}
        answer = self.admin.post("/v1/keys", json=body)
        assert answer.status_code == 201, answer.text
        self.keys[principal] = answer.json()["key"]
        return self.keys[principal]

    def invoke(self, payload: dict[str, Any]) -> httpx.Response:
        auth = {"authorization": f"Bearer {self.keys['shop-frontend']}"}
        body = {"capability": "cs.answer", "payload": payload}
        return httpx.post(self.caller_url + "/v1/invoke", json=body, headers=auth, timeout=30)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    if not (PEERS / "node_modules" / "@agent-reach" / "sdk" / "dist").is_dir():
        pytest.fail(
            "the TypeScript SDK is missing: build clients/typescript, then npm install in "
            "tests/interop/peers (scripts/test.sh does)"
        )
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    options: dict[str, Any] = {"auth": "on", "admin_key": ADMIN, "policy_file": policy}
    if request.param == "redis":
        options.update(
            registry_backend="redis",
            redis_url=request.getfixturevalue("redis_url"),
            redis_prefix=request.getfixturevalue("redis_prefix"),
        )
    with run_coordinator(Settings(**options)) as (first, _):
        if request.param == "memory":
            yield from _world(first, first)
            return
        with run_coordinator(Settings(**options)) as (second, _):
            yield from _world(first, second)


def _world(caller_url: str, agents_url: str) -> Iterator[World]:
    auth = {"authorization": f"Bearer {ADMIN}"}
    with httpx.Client(base_url=caller_url, headers=auth, timeout=10) as admin:
        world = World(caller_url, agents_url, admin)
        world.key("shop-frontend", "caller", ["cs.*", "specialist.*", "logistics.*"])
        world.key("cs-agents", "agent", ["cs.*"])
        specialist = world.key("specialist-agents", "agent", ["specialist.*"])
        world.key("logistics-agents", "agent", ["logistics.*"])
        servers = _python_agents(world)
        world.node = start_peer(
            "node-mesh-agent",
            [
                need("node"),
                "mesh_agent.mjs",
                agents_url,
                specialist,
                "node-specialist",
                "specialist.ask",
            ],
        )
        try:
            wait_until(
                lambda: len(admin.get("/v1/agents").json()["agents"]) == 3,
                "the three agents to register",
            )
            yield world
        finally:
            world.node.process.kill()
            world.node.process.wait()
            stop_all(servers)


def _python_agents(world: World) -> list[ServerThread]:
    """cs-bot hands `specialist.ask` on as its payload says; the locator reports the
    chain its own token states."""
    verifier = DelegationVerifier(world.agents_url)

    async def answer(request: AgentRequest) -> dict[str, Any]:
        assert request.delegation is not None
        world.tokens.append(request.delegation["token"])
        try:
            handed = await request.delegate("specialist.ask", payload=request.payload)
        except ReachError as exc:
            return {"refused": exc.code, "failed": exc.details.get("failed")}
        return {"specialist": handed.result}

    async def locate(request: AgentRequest) -> dict[str, Any]:
        assert request.delegation is not None
        seen = await verifier.verify(request.delegation["token"])
        return {
            "located": "aisle 7",
            "caller": seen.caller,
            "chain": [[h.agent, h.instance, h.capability] for h in seen.chain],
        }

    servers = []
    for agent_id, capability, principal, handler in (
        ("cs-bot", "cs.answer", "cs-agents", answer),
        ("locator", "logistics.locate", "logistics-agents", locate),
    ):
        agent = Agent(
            agent_id,
            [capability],
            coordinator_url=world.agents_url,
            api_key=world.keys[principal],
        )
        agent.handler(handler)
        server = ServerThread(agent.app)
        agent.endpoint_url = f"{server.url}/invoke"
        servers.append(server.start())
    return servers


def test_a_node_agent_verifies_its_chain_and_delegates_onward(world: World) -> None:
    answer = world.invoke({"then": {"capability": "logistics.locate", "payload": {}}})
    assert answer.status_code == 200, answer.text
    specialist = answer.json()["result"]["specialist"]
    seen = specialist["seen"]
    assert specialist["at"] == "node-specialist"
    assert seen["caller"] == "shop-frontend"  # on whose behalf: `sub`
    assert seen["chain"] == CHAIN  # through whom: `act`, then `may_act` (this agent)
    assert seen["depth"] == 2
    assert seen["scope"] == ["logistics.*"]  # what it may hand on
    onward = specialist["then"]
    assert (onward["status"], onward["agent_id"]) == (200, "locator")
    assert onward["result"]["located"] == "aisle 7"
    assert onward["result"]["caller"] == "shop-frontend"
    assert onward["result"]["chain"] == [
        ["cs-agents", "cs-bot", "cs.answer"],
        ["specialist-agents", "node-specialist", "specialist.ask"],
        ["logistics-agents", "locator", "logistics.locate"],
    ]


def test_the_node_agents_onward_call_stays_within_the_policy(world: World) -> None:
    # specialist-agents may hand on logistics.* only: cs.* is refused by the coordinator.
    answer = world.invoke({"then": {"capability": "specialist.ask", "payload": {}}})
    onward = answer.json()["result"]["specialist"]["then"]
    assert onward["status"] == 422 and onward["error"]["code"] == "delegation_cycle"
    answer = world.invoke({"then": {"capability": "cs.other", "payload": {}}})
    onward = answer.json()["result"]["specialist"]["then"]
    assert (onward["status"], onward["error"]["code"]) == (403, "delegation_denied")


def _tampered(token: str) -> str:
    """The token with its `sub` changed and the signature kept."""
    head, claims, signature = token.split(".")
    decoded = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
    decoded["sub"] = "someone-richer"
    forged = base64.urlsafe_b64encode(json.dumps(decoded).encode()).rstrip(b"=").decode()
    return f"{head}.{forged}.{signature}"


def test_the_node_agent_refuses_a_tampered_token(world: World) -> None:
    assert world.node is not None
    world.invoke({})
    before = world.node.stats()
    genuine = world.tokens[-1]  # cs-bot's, as the coordinator delivered it
    delivery: dict[str, Any] = {
        "request_id": "req-forged",
        "capability": "specialist.ask",
        "payload": {"then": {"capability": "logistics.locate", "payload": {}}},
        "trace_id": "0" * 32,
        "hop": 3,
    }
    for token in (_tampered(genuine), genuine[:-4] + "AAAA"):
        delivery["delegation"] = {"token": token, "expires_at": 0, "depth": 2}
        answer = httpx.post(world.node.url + "/invoke", json=delivery, timeout=10)
        assert answer.status_code == 401
        assert answer.json()["error"]["code"] == "delegation_invalid"
        assert answer.headers["x-reach-retryable"] == "false"
    after = world.node.stats()
    assert after["refused"] == before["refused"] + 2
    assert after["acted"] == before["acted"]  # nothing acted on, nothing handed on
    # The same delivery with the genuine token verifies: the refusals were the tampering.
    delivery["delegation"] = {"token": genuine, "expires_at": 0, "depth": 1}
    answer = httpx.post(world.node.url + "/invoke", json=delivery, timeout=10)
    assert answer.status_code == 200
    assert answer.json()["seen"]["caller"] == "shop-frontend"
