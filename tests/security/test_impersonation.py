"""S6: agent X tries to renew, take over or remove agent Y's instance, and to register
capabilities its rules do not grant. Each attempt must answer 403 and leave the
registry as the backend holds it unchanged: Y's instance keeps its endpoint,
capabilities and owner, and nothing X was refused appears.
"""

from __future__ import annotations

from typing import Any

import pytest
from attack_kit import (
    CAPABILITY_1,
    CAPABILITY_2,
    AttackReport,
    Coordinator,
    ReportFactory,
    World,
    registration,
)


def _attacks(world: World, victim: str) -> dict[str, tuple[str, str, dict[str, Any] | None]]:
    """Attack name -> (method, path, body), all as agent X against `victim` (Y's)."""
    hijack = registration(victim, world.x.endpoint, CAPABILITY_1, display_name="hijacked")
    return {
        "heartbeat Y's instance": ("POST", f"/v1/agents/{victim}/heartbeat", None),
        "deregister Y's instance": ("DELETE", f"/v1/agents/{victim}", None),
        "re-register Y's instance with X's endpoint": ("POST", "/v1/agents", hijack),
        "re-register Y's instance as is": (
            "POST",
            "/v1/agents",
            registration(victim, world.y.endpoint, CAPABILITY_2),
        ),
        "register capability 2 (not granted)": (
            "POST",
            "/v1/agents",
            registration("x-beta", world.x.endpoint, CAPABILITY_2),
        ),
        "register capabilities 1 and 2 at once": (
            "POST",
            "/v1/agents",
            registration("x-both", world.x.endpoint, CAPABILITY_1, CAPABILITY_2),
        ),
        "register a generic catch-all (capability 2)": (
            "POST",
            "/v1/agents",
            registration("x-generic", world.x.endpoint, CAPABILITY_2, generic=True),
        ),
    }


def _run_attacks(world: World, at: Coordinator, label: str, attack: AttackReport) -> None:
    """Every attack of `_attacks` on Y's `y-1`, sent to `at`."""
    victim = "y-1"
    deployment = world.deployment
    for name, (method, path, body) in _attacks(world, victim).items():
        before = world.stored(victim)
        agents_before = _agent_ids(world)
        answer = deployment.call(world.keys["agent-x"], method, path, json=body, at=at)
        after = world.stored(victim)
        appeared = _agent_ids(world) - agents_before
        changed = before != after or bool(appeared)
        attack.record(
            f"{label}: {name}",
            through=answer.status_code != 403 or changed,
            status=answer.status_code,
            registry_changed=changed,
            appeared=sorted(appeared),
        )


def _agent_ids(world: World) -> set[str]:
    answer = world.call("admin", "GET", "/v1/agents")
    return {view["id"] for view in answer.json()["agents"]}


def test_an_agent_cannot_touch_another_agents_instance_or_grant_itself_capabilities(
    world: World, report: ReportFactory
) -> None:
    attack = report("impersonation", "S6 agent impersonation")
    deployment = world.deployment
    for coordinator, label in zip(deployment.both(), ("same", "other"), strict=False):
        _run_attacks(world, coordinator, f"{label} coordinator", attack)
    caller = world.call("caller-a", "POST", "/v1/agents", json=registration("a-1", "x", "a.b"))
    attack.record("caller key registers an agent", through=caller.status_code != 403)
    renewed = world.call("agent-y", "POST", "/v1/agents/y-1/heartbeat")
    attack.record("Y can still renew its own instance", through=renewed.status_code != 200)
    delivered = world.invoke("caller-b", CAPABILITY_2)
    attack.record(
        "Y still receives its traffic afterwards",
        through=delivered.status_code != 200 or delivered.json()["agent_id"] != "y-1",
        status=delivered.status_code,
    )
    attack.figures["unauthorized_changes"] = sum(c.get("registry_changed", 0) for c in attack.cases)
    attack.assert_nothing_got_through()


# Not on memory: one process's state, there is no second, stale index.
@pytest.mark.parametrize("backend", [pytest.param("redis", marks=pytest.mark.redis)])
def test_ownership_holds_on_a_coordinator_that_has_not_seen_the_instance_yet(
    request: pytest.FixtureRequest, report: ReportFactory, backend: str
) -> None:
    world: World = request.getfixturevalue("world")
    attack = report("impersonation_stale_index", "S6 impersonation via a stale index")
    deployment = world.deployment
    stale, fresh = deployment.first, deployment.second()
    # The stale coordinator stops following registry events, as when its subscription drops.
    stale.run(stale.runtime.registry.stop())
    for name, (method, path, takes_over) in {
        "heartbeat": ("POST", "/v1/agents/{victim}/heartbeat", False),
        "take over": ("POST", "/v1/agents", True),
        "deregister": ("DELETE", "/v1/agents/{victim}", False),
    }.items():
        victim = f"y-{name.replace(' ', '-')}"
        own = registration(victim, world.y.endpoint, CAPABILITY_2)
        registered = deployment.call(
            world.keys["agent-y"], "POST", "/v1/agents", json=own, at=fresh
        )
        assert registered.status_code == 201, registered.text
        before = world.stored(victim)
        hijack = registration(victim, world.x.endpoint, CAPABILITY_1) if takes_over else None
        answer = deployment.call(
            world.keys["agent-x"], method, path.format(victim=victim), json=hijack, at=stale
        )
        changed = world.stored(victim) != before
        attack.record(
            f"stale coordinator: {name} Y's instance",
            through=answer.status_code != 403 or changed,
            status=answer.status_code,
            registry_changed=changed,
        )
    attack.assert_nothing_got_through()
