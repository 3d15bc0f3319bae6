"""The Python SDK: `ReachClient` for callers, `Agent` for agent authors.

It speaks only the public HTTP API and the agent contract (docs/agent-contract.md), so
everything it does an agent in any other language can do too. Each name is imported on
first use (PEP 562): a caller that only needs the client never loads the agent's server.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_reach.model.offers import OfferAnswer, OfferRequest
    from agent_reach.sdk.agent import Agent, AgentRequest
    from agent_reach.sdk.client import ReachClient, SyncReachClient
    from agent_reach.sdk.delegation import DelegationVerifier, VerifiedDelegation
    from agent_reach.sdk.orchestrator import Orchestrator, SyncOrchestrator
    from agent_reach.sdk.streams import StreamEvent
    from agent_reach.sdk.tokens import ClientCredentials, TokenUnavailable

__all__ = [
    "Agent",
    "AgentRequest",
    "ClientCredentials",
    "DelegationVerifier",
    "OfferAnswer",
    "OfferRequest",
    "Orchestrator",
    "ReachClient",
    "StreamEvent",
    "SyncOrchestrator",
    "SyncReachClient",
    "TokenUnavailable",
    "VerifiedDelegation",
]

_HOMES = {
    "Agent": "agent_reach.sdk.agent",
    "AgentRequest": "agent_reach.sdk.agent",
    "ClientCredentials": "agent_reach.sdk.tokens",
    "DelegationVerifier": "agent_reach.sdk.delegation",
    "OfferAnswer": "agent_reach.model.offers",
    "OfferRequest": "agent_reach.model.offers",
    "Orchestrator": "agent_reach.sdk.orchestrator",
    "ReachClient": "agent_reach.sdk.client",
    "StreamEvent": "agent_reach.sdk.streams",
    "SyncOrchestrator": "agent_reach.sdk.orchestrator",
    "SyncReachClient": "agent_reach.sdk.client",
    "TokenUnavailable": "agent_reach.sdk.tokens",
    "VerifiedDelegation": "agent_reach.sdk.delegation",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'agent_reach.sdk' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value  # once imported, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
