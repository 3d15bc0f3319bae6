"""The public surface is pinned: changing what `import agent_reach` offers is a visible diff."""

from __future__ import annotations

import agent_reach

PUBLIC_NAMES = [
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


def test_all_lists_exactly_the_public_names() -> None:
    assert agent_reach.__all__ == PUBLIC_NAMES


def test_every_public_name_is_importable() -> None:
    missing = [name for name in agent_reach.__all__ if not hasattr(agent_reach, name)]
    assert missing == []


def test_every_error_class_derives_from_reach_error() -> None:
    errors = [getattr(agent_reach, n) for n in PUBLIC_NAMES if n.endswith(("Error", "Failed"))]
    assert all(issubclass(cls, agent_reach.ReachError) for cls in errors)
