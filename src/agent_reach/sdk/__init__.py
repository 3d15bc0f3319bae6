"""The Python SDK: `ReachClient` for callers, `Agent` for agent authors.

It speaks only the public HTTP API and the agent contract (docs/agent-contract.md), so
everything it does an agent in any other language can do too.
"""

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
