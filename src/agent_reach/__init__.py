"""Agent-Reach: discovery, routing and delivery between agents.

What users import lives here: the clients and agent helpers of the SDK, the
coordinator's app factory and settings, and every error class to catch.
"""

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
