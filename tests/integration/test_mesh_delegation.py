"""The Agent Mesh end to end: SDK agents that hand work on, on behalf of their caller.

caller -> cs-bot (cs.answer) -> order-agent (order.track) -> locator (logistics.locate):
each agent delegates with nothing but its delivery's token, and the last one checks the
token with the coordinators' public keys. On memory with one coordinator, and on Redis
with two: the chain starts on one coordinator and each hand-off goes through the other.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_reach import (
    Agent,
    AgentRequest,
    DelegationVerifier,
    ReachError,
    Settings,
    SyncReachClient,
)
from agent_reach.testing.servers import ServerThread, run_coordinator, stop_all
from agent_reach.testing.waiting import wait_until

ADMIN = "mesh-delegation-admin-key-0123456789"
POLICY = """
[[access.delegate]]
principals = ["name:cs-agents"]
capabilities = ["order.*"]

[[access.delegate]]
principals = ["name:order-agents"]
capabilities = ["logistics.*", "cs.*", "refund.*"]

[delegation]
max_depth = {max_depth}

# The delegating agent's own bucket: two hand-offs of order.* per ~minute, whoever the
# caller (the callers' own buckets are apart).
[[quotas]]
principals = ["name:cs-agents"]
capabilities = ["order.*"]
rate_per_s = 0.001
burst = 2
"""


@dataclass
class Mesh:
    """Two coordinator URLs (the same one on memory), keys, and what agents saw."""

    caller_url: str
    agents_url: str
    admin: httpx.Client
    keys: dict[str, str] = field(default_factory=dict)
    tokens: dict[str, list[str]] = field(default_factory=dict)
    contexts: dict[str, Any] = field(default_factory=dict)

    def key(self, principal: str, role: str, grants: list[str]) -> str:
        body = {"principal": principal, "role": role, "capabilities": grants}
        answer = self.admin.post("/v1/keys", json=body)
        assert answer.status_code == 201, answer.text
        key: str = answer.json()["key"]
        self.keys[principal] = key
        return key


def _coordinators(backend: str, tmp_path: Path, redis_url: str, prefix: str, depth: int) -> Any:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY.replace("{max_depth}", str(depth)))
    settings = {
        "auth": "on",
        "admin_key": ADMIN,
        "policy_file": policy,
        "decision_log": "off",
    }
    if backend == "redis":
        settings.update(registry_backend="redis", redis_url=redis_url, redis_prefix=prefix)
    return Settings(**settings), Settings(**settings)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _mesh(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path, depth: int
) -> Iterator[Mesh]:
    redis_url = request.getfixturevalue("redis_url") if backend == "redis" else ""
    prefix = request.getfixturevalue("redis_prefix") if backend == "redis" else ""
    first, second = _coordinators(backend, tmp_path, redis_url, prefix, depth)
    with run_coordinator(first) as (url_a, _):
        if backend == "memory":
            yield from _world(url_a, url_a)
            return
        with run_coordinator(second) as (url_b, _):
            yield from _world(url_a, url_b)


def _world(caller_url: str, agents_url: str) -> Iterator[Mesh]:
    with httpx.Client(
        base_url=caller_url, headers={"authorization": f"Bearer {ADMIN}"}, timeout=10
    ) as admin:
        world = Mesh(caller_url, agents_url, admin)
        world.key("shop-frontend", "caller", ["cs.*", "order.*", "logistics.*"])
        world.key("cs-agents", "agent", ["cs.*"])
        world.key("order-agents", "agent", ["order.*"])
        world.key("logistics-agents", "agent", ["logistics.*"])
        world.key("refund-agents", "agent", ["refund.*"])
        with _agents(world):
            yield world


@pytest.fixture
def mesh(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Iterator[Mesh]:
    yield from _mesh(request, backend, tmp_path, depth=4)


def _forward(mesh: Mesh, name: str) -> Any:
    """A handler that delegates what its payload's `then` says, and reports the outcome."""

    async def handle(request: AgentRequest) -> dict[str, Any]:
        assert request.delegation is not None
        mesh.tokens.setdefault(name, []).append(request.delegation["token"])
        step = (request.payload or {}).get("then")
        if step is None:
            return {"at": name}
        try:
            answered = await request.delegate(
                step.get("capability"),
                payload=step.get("payload"),
                context_id=step.get("context_id"),
            )
        except ReachError as exc:
            return {"at": name, "refused": exc.code, "failed": exc.details.get("failed")}
        return {"at": name, "then": answered.result}

    return handle


class _Agents:
    def __init__(self, world: Mesh) -> None:
        self.world = world
        self.servers: list[ServerThread] = []

    def add(self, agent: Agent, handler: Any) -> None:
        agent.handler(handler)
        server = ServerThread(agent.app)
        agent.endpoint_url = f"{server.url}/invoke"
        self.servers.append(server.start())


def _agents(world: Mesh) -> Any:
    agents = _Agents(world)
    verifier = DelegationVerifier(world.agents_url)

    def agent(agent_id: str, capability: str, principal: str, **extra: Any) -> Agent:
        return Agent(
            agent_id,
            [capability],
            coordinator_url=world.agents_url,
            api_key=world.keys[principal],
            **extra,
        )

    async def locate(request: AgentRequest) -> dict[str, Any]:
        assert request.delegation is not None
        world.tokens.setdefault("locator", []).append(request.delegation["token"])
        seen = await verifier.verify(request.delegation["token"])
        projection = await request.context_data()
        return {
            "caller": seen.caller,
            "chain": [[h.agent, h.instance, h.capability] for h in seen.chain],
            "depth": request.delegation["depth"],
            "context": projection,
        }

    agents.add(agent("cs-bot", "cs.answer", "cs-agents"), _forward(world, "cs-bot"))
    agents.add(
        agent("order-1", "order.track", "order-agents", context_fields=["order"]),
        _forward(world, "order-1"),
    )
    agents.add(
        agent("locator", "logistics.locate", "logistics-agents", context_fields=["order"]),
        locate,
    )
    agents.add(
        agent("refund-1", "refund.issue", "refund-agents", cost=5), _forward(world, "refund-1")
    )

    class Running:
        def __enter__(self) -> _Agents:
            with SyncReachClient(world.caller_url, api_key=ADMIN) as client:
                wait_until(lambda: len(client.agents()) == 4, "the four agents to register")
            return agents

        def __exit__(self, *exc: object) -> None:
            stop_all(agents.servers)

    return Running()


def invoke(mesh: Mesh, payload: dict[str, Any], **options: Any) -> Any:
    with SyncReachClient(mesh.caller_url, api_key=mesh.keys["shop-frontend"]) as caller:
        return caller.invoke("cs.answer", payload=payload, **options).result


def chain_to(*steps: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """A payload that makes each agent in turn hand on to the next capability."""
    payload: dict[str, Any] = {}
    for capability, extra in reversed(steps):
        payload = {"then": {"capability": capability, "payload": payload, **extra}}
    return payload


def test_a_three_hop_chain_is_verified_at_its_last_agent(mesh: Mesh) -> None:
    answer = invoke(mesh, chain_to(("order.track", {}), ("logistics.locate", {})))
    located = answer["then"]["then"]
    assert located["caller"] == "shop-frontend"
    assert located["chain"] == [
        ["cs-agents", "cs-bot", "cs.answer"],
        ["order-agents", "order-1", "order.track"],
        ["logistics-agents", "locator", "logistics.locate"],
    ]
    assert located["depth"] == 3


@pytest.mark.parametrize(
    ("steps", "failed"),
    [
        ((("refund.issue", {}),), "delegate_rule"),  # cs-bot may hand on order.* only
        ((("order.track", {}), ("refund.issue", {})), "caller"),  # the caller has no refund.*
    ],
)
def test_each_denial_names_what_failed(mesh: Mesh, steps: Any, failed: str) -> None:
    answer = invoke(mesh, chain_to(*steps))
    while "then" in answer:
        answer = answer["then"]
    assert (answer["refused"], answer["failed"]) == ("delegation_denied", failed)


def test_handing_a_task_back_up_the_chain_is_a_cycle(mesh: Mesh) -> None:
    answer = invoke(mesh, chain_to(("order.track", {}), ("cs.answer", {})))
    assert answer["then"]["refused"] == "delegation_cycle"


@pytest.fixture
def shallow(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Iterator[Mesh]:
    yield from _mesh(request, backend, tmp_path, depth=2)


def test_a_chain_deeper_than_the_policy_allows_is_denied(shallow: Mesh) -> None:
    answer = invoke(shallow, chain_to(("order.track", {}), ("logistics.locate", {})))
    assert answer["then"]["refused"] == "delegation_denied"
    assert answer["then"]["failed"] == "max_depth"


def test_a_delegation_that_would_overspend_is_refused_before_delivery(mesh: Mesh) -> None:
    mesh.admin.post("/v1/keys", json={"principal": "x", "role": "caller", "capabilities": ["cs.*"]})
    # order-agents may hand on refund.* (5 a call): within 10 it runs, within 4 it does not.
    steps = chain_to(("order.track", {}), ("refund.issue", {}))
    with SyncReachClient(mesh.caller_url, api_key=ADMIN) as admin:
        rich = admin.invoke("cs.answer", payload=steps, budget=10).result
        poor = admin.invoke("cs.answer", payload=steps, budget=4).result
    assert rich["then"]["then"] == {"at": "refund-1"}
    assert poor["then"]["refused"] == "budget_exhausted"
    assert len(mesh.tokens["refund-1"]) == 1  # the refused one never reached it


def _call_with(mesh: Mesh, token: str, capability: str) -> tuple[int, dict[str, Any]]:
    body = json.dumps({"capability": capability, "payload": {}}).encode()
    request = urllib.request.Request(  # noqa: S310 -- a loopback http URL
        mesh.agents_url + "/v1/invoke",
        data=body,
        headers={"authorization": f"Bearer {token}", "content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_forged_and_tampered_tokens_are_invalid(mesh: Mesh) -> None:
    invoke(mesh, chain_to(("order.track", {})))
    token = mesh.tokens["cs-bot"][-1]
    head, claims, signature = token.split(".")
    decoded = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
    decoded["sub"] = "someone-richer"
    forged_claims = base64.urlsafe_b64encode(json.dumps(decoded).encode()).rstrip(b"=").decode()
    for forged in (f"{head}.{forged_claims}.{signature}", f"{head}.{claims}.{signature[:-4]}AAAA"):
        status, body = _call_with(mesh, forged, "order.track")
        assert (status, body["error"]["code"]) == (401, "delegation_invalid")
    status, _ = _call_with(mesh, token, "order.track")  # the genuine token, still valid
    assert status == 200


def test_an_expired_token_is_invalid(mesh: Mesh) -> None:
    invoke(mesh, chain_to(("order.track", {})))
    token = mesh.tokens["cs-bot"][-1]

    def expired() -> bool:
        return _call_with(mesh, token, "order.track")[1].get("error", {}).get("code") == (
            "delegation_invalid"
        )

    wait_until(expired, "the token to expire with its request's deadline")


def test_a_token_does_not_widen_what_its_holder_may_do(mesh: Mesh) -> None:
    invoke(mesh, chain_to(("order.track", {})))
    token = mesh.tokens["order-1"][-1]
    auth = {"authorization": f"Bearer {token}"}
    with httpx.Client(base_url=mesh.agents_url, headers=auth, timeout=10) as holder:
        assert holder.post("/v1/keys", json={"principal": "me", "role": "admin"}).status_code == 403
        spec = {
            "id": "rogue",
            "capabilities": ["order.track"],
            "transport": {"type": "http", "endpoint": "http://127.0.0.1:9/invoke"},
        }
        assert holder.post("/v1/agents", json=spec).status_code == 403
        assert holder.get("/v1/deadletters").status_code == 403


def test_a_disabled_agent_is_out_of_routing_and_its_tokens_refused(mesh: Mesh) -> None:
    invoke(mesh, chain_to(("order.track", {})))
    token = mesh.tokens["cs-bot"][-1]
    answer = mesh.admin.post("/v1/agents/cs-bot/disable")
    assert answer.json() == {"agent_id": "cs-bot", "disabled": True, "changed": True}

    def refused() -> dict[str, Any] | None:
        status, body = _call_with(mesh, token, "order.track")
        return body["error"] if status == 403 else None

    error = wait_until(refused, "every coordinator to refuse the disabled agent's token")
    assert (error["code"], error["failed"]) == ("delegation_denied", "agent_disabled")
    with (
        SyncReachClient(mesh.caller_url, api_key=mesh.keys["shop-frontend"]) as caller,
        pytest.raises(ReachError) as caught,
    ):
        caller.invoke("cs.answer", payload={}, suspend=False)
    assert caught.value.code == "no_instance"
    assert mesh.admin.post("/v1/agents/cs-bot/enable").json()["changed"] is True
    # Only admins switch, only agents that exist, only ids that are ids.
    assert mesh.admin.post("/v1/agents/no-such-agent/disable").status_code == 404
    assert mesh.admin.post("/v1/agents/bad%20id!/disable").status_code == 422
    caller = {"authorization": f"Bearer {mesh.keys['shop-frontend']}"}
    assert mesh.admin.post("/v1/agents/cs-bot/disable", headers=caller).status_code == 403
    wait_until(lambda: invoke(mesh, {}) == {"at": "cs-bot"}, "cs-bot back in routing")


def test_a_delegated_context_is_seen_only_as_the_callees_projection(mesh: Mesh) -> None:
    with httpx.Client(
        base_url=mesh.caller_url,
        headers={"authorization": f"Bearer {mesh.keys['shop-frontend']}"},
        timeout=10,
    ) as caller:
        created = caller.post(
            "/v1/contexts",
            json={"document": {"order": {"id": "A-1"}, "card": "card-number-of-the-caller"}},
        )
        context_id = created.json()["context_id"]
    steps = chain_to(
        ("order.track", {"context_id": context_id}),
        ("logistics.locate", {"context_id": context_id}),
    )
    answer = invoke(mesh, steps, context_id=context_id)
    assert answer["then"]["then"]["context"] == {"order": {"id": "A-1"}}
    wrong = chain_to(("order.track", {"context_id": "ctx-not-the-callers"}))
    refused = invoke(mesh, wrong, context_id=context_id)
    assert (refused["refused"], refused["failed"]) == ("delegation_denied", "context")


def test_the_public_keys_verify_what_agents_received(mesh: Mesh) -> None:
    invoke(mesh, chain_to(("order.track", {})))
    keys = httpx.get(mesh.caller_url + "/.well-known/jwks.json").json()["keys"]
    assert keys and all(k["kty"] == "OKP" and k["alg"] == "EdDSA" for k in keys)
    head = json.loads(base64.urlsafe_b64decode(mesh.tokens["order-1"][-1].split(".")[0] + "=="))
    assert head["kid"] in {k["kid"] for k in keys}


def test_quotas_count_against_the_delegating_agent_apart_from_its_caller(mesh: Mesh) -> None:
    steps = chain_to(("order.track", {}))
    outcomes = [invoke(mesh, steps) for _ in range(3)]
    assert [o.get("then") for o in outcomes[:2]] == [{"at": "order-1"}, {"at": "order-1"}]
    assert outcomes[2]["refused"] == "quota_exceeded"  # cs-agents' bucket, not the caller's
    with SyncReachClient(mesh.caller_url, api_key=mesh.keys["shop-frontend"]) as caller:
        assert caller.invoke("order.track", payload={}).result == {"at": "order-1"}
