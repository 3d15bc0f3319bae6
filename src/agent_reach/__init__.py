"""Agent-Reach: discovery, routing and delivery between agents.

What users import lives here: the clients and agent helpers of the SDK, the
coordinator's app factory and settings, and every error class to catch. Each name is
imported on first use (PEP 562), so `agent-reach --help` or a client alone never loads
the coordinator.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_reach.config import Settings
    from agent_reach.errors import (
        AgentFailed,
        AgentTimeout,
        AgentUnreachable,
        CallerError,
        Conflict,
        HopLimit,
        InvalidRequest,
        NoCapability,
        NoInstance,
        NoRoute,
        NotFound,
        PayloadTooLarge,
        ReachError,
        StoreUnavailable,
        ValidationFailed,
    )
    from agent_reach.sdk import (
        Agent,
        AgentRequest,
        ClientCredentials,
        DelegationVerifier,
        OfferAnswer,
        OfferRequest,
        Orchestrator,
        ReachClient,
        StreamEvent,
        SyncOrchestrator,
        SyncReachClient,
        TokenUnavailable,
    )
    from agent_reach.server.app import create_app

__all__ = [
    "Agent",
    "AgentFailed",
    "AgentRequest",
    "AgentTimeout",
    "AgentUnreachable",
    "CallerError",
    "ClientCredentials",
    "Conflict",
    "DelegationVerifier",
    "HopLimit",
    "InvalidRequest",
    "NoCapability",
    "NoInstance",
    "NoRoute",
    "NotFound",
    "OfferAnswer",
    "OfferRequest",
    "Orchestrator",
    "PayloadTooLarge",
    "ReachClient",
    "ReachError",
    "Settings",
    "StoreUnavailable",
    "StreamEvent",
    "SyncOrchestrator",
    "SyncReachClient",
    "TokenUnavailable",
    "ValidationFailed",
    "create_app",
]

_SDK = "agent_reach.sdk"
_HOMES = {
    "Settings": "agent_reach.config",
    "create_app": "agent_reach.server.app",
    **{
        name: _SDK
        for name in (
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
        )
    },
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'agent_reach' has no attribute {name!r}")
    value = getattr(import_module(_HOMES.get(name, "agent_reach.errors")), name)
    globals()[name] = value  # once imported, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
