"""Keys carry their grants: a first secured setup needs no policy file (issue 12).

An agent key minted with `capabilities` may register exactly those, a caller key may
invoke and route to exactly those; everything else stays denied by default, and the
policy file's rules, when there is one, apply on top. The agents' ledgers are the
oracle for invocations: a refused one delivers nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from attack_kit import (
    ALLOWED_NETWORK,
    CAPABILITY_1,
    CAPABILITY_2,
    AgentFactory,
    Deployment,
    World,
    registration,
)
from pydantic import SecretStr

from agent_reach.config import Settings


@pytest.fixture
def bare(
    backend: str, admin_key: str, redis_options: dict[str, str], tmp_path: Path
) -> Iterator[Deployment]:
    """A secured coordinator with no policy file at all."""

    def settings() -> Settings:
        return Settings(
            auth="on",
            admin_key=SecretStr(admin_key),
            endpoint_allow=[ALLOWED_NETWORK],
            decision_log=str(tmp_path / "decisions.log"),
            registry_backend=backend,
            **redis_options,
        )

    deployed = Deployment(backend, settings)
    try:
        yield deployed
    finally:
        deployed.close()


def _mint(deployment: Deployment, admin_key: str, **body: Any) -> dict[str, Any]:
    answer = deployment.call(admin_key, "POST", "/v1/keys", json=body)
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


def _invoke(deployment: Deployment, key: str, capability: str) -> int:
    body = {"capability": capability, "payload": {}, "suspend": False}
    return deployment.call(key, "POST", "/v1/invoke", json=body).status_code


def test_granted_keys_work_without_a_policy_file_and_nothing_else_does(
    bare: Deployment, admin_key: str, start_agent: AgentFactory
) -> None:
    agent = _mint(bare, admin_key, principal="inv-agent", role="agent", capabilities=["alpha.*"])
    caller = _mint(bare, admin_key, principal="cs-bot", capabilities=["Alpha.Read"])
    bare_agent = _mint(bare, admin_key, principal="no-grants", role="agent")
    assert agent["domain"] is None and agent["capabilities"] == ["alpha.*"]
    assert caller["role"] == "caller" and caller["capabilities"] == ["alpha.read"]
    x = start_agent(name="x")

    def register(key: str, agent_id: str, capability: str) -> int:
        body = registration(agent_id, x.endpoint, capability)
        return bare.register(key, body).status_code

    assert register(agent["key"], "x-1", CAPABILITY_1) == 201
    assert register(agent["key"], "x-2", CAPABILITY_2) == 403  # beyond its grant
    assert register(bare_agent["key"], "x-3", CAPABILITY_1) == 403  # deny by default
    assert register(caller["key"], "x-4", CAPABILITY_1) == 403  # a caller never registers
    assert register(admin_key, "y-1", CAPABILITY_2) == 201

    assert _invoke(bare, caller["key"], CAPABILITY_1) == 200
    assert len(x.agent.received) == 1
    assert _invoke(bare, caller["key"], CAPABILITY_2) == 403
    assert _invoke(bare, agent["key"], CAPABILITY_1) == 403  # registering grants no invoking
    assert len(x.agent.received) == 1
    routed = bare.call(caller["key"], "POST", "/v1/route", json={"capability": CAPABILITY_1})
    assert routed.status_code == 200 and routed.json()["agent_id"] == "x-1"
    refused = bare.call(caller["key"], "POST", "/v1/route", json={"capability": CAPABILITY_2})
    assert refused.status_code == 403
    assert "no key grant or policy rule" in refused.json()["error"]["message"]

    listed = {k["principal"]: k for k in bare.call(admin_key, "GET", "/v1/keys").json()["keys"]}
    assert listed["cs-bot"]["capabilities"] == ["alpha.read"]
    assert listed["no-grants"]["capabilities"] == []


@pytest.mark.parametrize("role", ["admin", "observer"])
def test_grants_on_a_key_that_cannot_use_them_are_refused(
    bare: Deployment, admin_key: str, role: str
) -> None:
    body = {"principal": f"p-{role}", "role": role, "capabilities": ["alpha.*"]}
    answer = bare.call(admin_key, "POST", "/v1/keys", json=body)
    assert answer.status_code == 422, answer.text
    assert "carries no capability grants" in answer.text
    bad = bare.call(admin_key, "POST", "/v1/keys", json={"principal": "p", "capabilities": ["a*"]})
    assert bad.status_code == 422


def test_policy_rules_still_apply_on_top_of_a_key_grant(world: World) -> None:
    """`POLICY` lets domain b invoke `beta.*`; the key adds `alpha.read` of its own."""
    admin_key = world.keys["admin"]
    both = _mint(
        world.deployment,
        admin_key,
        principal="both",
        domain="b",
        capabilities=[CAPABILITY_1],
    )["key"]
    delivered = world.deliveries()
    assert _invoke(world.deployment, both, CAPABILITY_1) == 200  # its key's grant
    assert _invoke(world.deployment, both, CAPABILITY_2) == 200  # the policy's domain rule
    assert _invoke(world.deployment, both, "gamma.read") == 403
    assert world.deliveries() == delivered + 2
