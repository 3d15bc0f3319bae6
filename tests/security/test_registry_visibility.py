"""S4 (registry): a key sees what it may use, and how an instance is reached only where
it must.

Agent X registers a legacy service as an `http-template` adapter whose headers carry the
service's credentials. Its owner and the admin see the whole registration; an observer
sees where it is reached but not the templates; caller A (who may invoke it) sees it
without its transport; caller B (who may not) is told it does not exist, in the listing
and when naming it.
"""

from __future__ import annotations

from typing import Any

from attack_kit import CAPABILITY_1, ReportFactory, World, registration

ERP_SECRET = "Basic ZXJwOnMzY3JldA=="  # the legacy service's credentials in a template


def _listed(world: World, who: str, agent_id: str) -> dict[str, Any] | None:
    """The instance as `GET /v1/agents` shows it to `who` (None: not listed)."""
    agents = world.call(who, "GET", "/v1/agents").json()["agents"]
    return next((_shape(view) for view in agents if view["id"] == agent_id), None)


def _shape(view: dict[str, Any]) -> dict[str, Any]:
    """What visibility decides: the capabilities and the transport shown."""
    return {"capabilities": view["capabilities"], "transport": view["transport"]}


def test_an_adapters_credentials_are_shown_only_to_its_owner_and_the_admin(
    world: World, report: ReportFactory
) -> None:
    attack = report("registry_visibility", "S4 what of the registry each key sees")
    transport = {
        "type": "http-template",
        "endpoint": world.x.endpoint,
        "method": "POST",
        "path": "/erp/stock",
        "headers": {"Authorization": ERP_SECRET},
        "body": {"sku": "{{ payload.sku }}"},
    }
    spec = registration("erp-1", world.x.endpoint, CAPABILITY_1, transport=transport)
    assert world.deployment.register(world.keys["agent-x"], spec).status_code == 201

    for who in ("admin", "agent-x"):
        view = world.call(who, "GET", "/v1/agents/erp-1").json()
        assert view["transport"]["headers"] == {"Authorization": ERP_SECRET}, who
        assert _listed(world, who, "erp-1") == _shape(view)
    observed = world.call("observer", "GET", "/v1/agents/erp-1").json()
    assert observed["transport"] == {
        "type": "http-template",
        "endpoint": world.x.endpoint,
        "health_endpoint": None,
    }
    assert _listed(world, "observer", "erp-1") == _shape(observed)
    caller_a = world.call("caller-a", "GET", "/v1/agents/erp-1").json()
    assert caller_a["transport"] is None and caller_a["capabilities"] == [CAPABILITY_1]
    hidden = world.call("caller-b", "GET", "/v1/agents/erp-1")
    assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "unknown_agent"

    for who in ("observer", "caller-a", "caller-b", "agent-y"):
        seen = [
            world.call(who, "GET", "/v1/agents/erp-1").text,
            world.call(who, "GET", "/v1/agents").text,
            world.call(who, "GET", "/v1/capabilities").text,
        ]
        attack.record(
            f"{who} reads the adapter's credentials",
            through=any(ERP_SECRET in text for text in seen),
        )
    attack.record(
        "caller B learns the instance exists",
        through=_listed(world, "caller-b", "erp-1") is not None or hidden.status_code != 404,
    )
    attack.assert_nothing_got_through()
