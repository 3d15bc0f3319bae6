"""Who declares `idempotent` in its registration: the SDK agent by default (it runs a
request id once), a sidecar only when its config says the service does; and `safe`:
the SDK agent and the sidecar when told, an A2A card by an extension, an MCP tool by
its `readOnlyHint` annotation (`idempotentHint`: idempotent)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agent_reach.adapters.a2a_cards import IDEMPOTENT_EXTENSION, SAFE_EXTENSION, parse_card
from agent_reach.federation.tools import expand
from agent_reach.model.agents import AgentSpec
from agent_reach.sdk.agent import Agent
from agent_reach.sidecar.service import Sidecar, SidecarConfig

COORDINATOR = "http://127.0.0.1:8500"
ENDPOINT = "http://127.0.0.1:9050/invoke"


def _sdk_spec(**options: Any) -> AgentSpec:
    agent = Agent("sdk-1", ["cap.one"], coordinator_url=COORDINATOR, **options)
    agent.endpoint_url = ENDPOINT
    return agent.spec()


def test_the_sdk_agent_declares_it_unless_told_not_to() -> None:
    assert _sdk_spec().idempotent is True
    assert _sdk_spec(idempotent=False).idempotent is False


@pytest.mark.parametrize("declared", [None, True, False])
def test_a_sidecar_declares_it_only_from_its_config(declared: bool | None) -> None:
    agent: dict[str, Any] = {"id": "side-1"}
    if declared is not None:
        agent["idempotent"] = declared
    config = SidecarConfig.model_validate(
        {
            "coordinator": COORDINATOR,
            "endpoint_url": ENDPOINT,
            "agent": agent,
            "service": {
                "url": "http://127.0.0.1:9060/api",
                "health_url": "http://127.0.0.1:9060/health",
            },
            "capabilities": [{"capability": "cap.one"}],
        }
    )
    assert Sidecar(config).agent.spec().idempotent is (declared is True)


def test_a_registration_without_it_does_not_declare_it() -> None:
    spec = AgentSpec.model_validate(
        {"id": "plain-1", "capabilities": ["cap.one"], "transport": {"endpoint": ENDPOINT}}
    )
    assert spec.idempotent is False


def test_the_sdk_agent_declares_safe_only_when_told() -> None:
    assert _sdk_spec().safe is False
    assert _sdk_spec(safe=True).safe is True


def _sidecar(agent: dict[str, Any], capability: dict[str, Any]) -> AgentSpec:
    config = SidecarConfig.model_validate(
        {
            "coordinator": COORDINATOR,
            "endpoint_url": ENDPOINT,
            "agent": {"id": "side-1", **agent},
            "service": {
                "url": "http://127.0.0.1:9060/api",
                "health_url": "http://127.0.0.1:9060/health",
            },
            "capabilities": [{"capability": "cap.one"}, {"capability": "cap.two", **capability}],
        }
    )
    return Sidecar(config).agent.spec()


def test_a_sidecar_declares_safe_for_the_agent_and_per_capability() -> None:
    spec = _sidecar({"safe": True}, {"safe": False, "idempotent": True})
    assert (spec.is_safe("cap.one"), spec.is_safe("cap.two")) == (True, False)
    assert (spec.is_idempotent("cap.one"), spec.is_idempotent("cap.two")) == (False, True)


@pytest.mark.parametrize("where", ["agent", "capability"])
def test_a_sidecar_config_with_a_declaration_that_is_not_a_boolean_is_refused(where: str) -> None:
    with pytest.raises(ValidationError, match="safe"):
        _sidecar(*(({"safe": "yes"}, {}) if where == "agent" else ({}, {"safe": "yes"})))


def test_an_a2a_card_declares_safe_and_idempotent_by_its_extensions() -> None:
    card = {
        "name": "stock",
        "url": "http://127.0.0.1:9070/a2a",
        "skills": [{"id": "stock.check"}],
        "capabilities": {"extensions": [{"uri": SAFE_EXTENSION}]},
    }
    assert (parse_card(card).safe, parse_card(card).idempotent) == (True, False)
    card["capabilities"] = {"extensions": [{"uri": IDEMPOTENT_EXTENSION}]}
    assert (parse_card(card).safe, parse_card(card).idempotent) == (False, True)


@pytest.mark.parametrize(
    ("annotations", "safe", "idempotent"),
    [
        ({"readOnlyHint": True}, True, False),
        ({"readOnlyHint": False, "idempotentHint": True}, False, True),
        ({"destructiveHint": True}, False, False),
        ({"readOnlyHint": "yes"}, False, False),  # not a boolean: declares nothing
        (None, False, False),
    ],
)
def test_an_mcp_tools_annotations_declare_its_capability(
    annotations: dict[str, Any] | None, safe: bool, idempotent: bool
) -> None:
    tool: dict[str, Any] = {"name": "look_up", "description": "stock of a sku"}
    if annotations is not None:
        tool["annotations"] = annotations
    plain = AgentSpec.model_validate(
        {"id": "mcp-1", "transport": {"type": "mcp", "endpoint": ENDPOINT}}
    )
    spec = expand(plain, [tool], {}, lambda _: False, strict=True)
    [capability] = spec.capabilities
    assert (spec.is_safe(capability), spec.is_idempotent(capability)) == (safe, idempotent)
