"""Who declares `idempotent` in its registration: the SDK agent by default (it runs a
request id once), a sidecar only when its config says the service does."""

from __future__ import annotations

from typing import Any

import pytest

from agent_reach.adapters.sidecar import Sidecar, SidecarConfig
from agent_reach.model.agents import AgentSpec
from agent_reach.sdk.agent import Agent

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
