"""The routing service: turn a request into matched capabilities, then into a decision."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from agent_reach.clock import Clock
from agent_reach.model.decisions import RouteDecision
from agent_reach.model.invocations import RouteRequest
from agent_reach.observability.decision_log import DecisionLog
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.affinity import AffinityTable
from agent_reach.routing.matchers.pipeline import MatchingPipeline
from agent_reach.routing.policy import RoutingPolicy
from agent_reach.routing.router import decide, exact_match


class RoutingService:
    """Routes over the live registry index with the policy in force at each call."""

    def __init__(
        self,
        index: RegistryIndex,
        policy: Callable[[], RoutingPolicy],
        clock: Clock,
        affinity: AffinityTable,
        matching: MatchingPipeline,
        decision_log: DecisionLog,
    ) -> None:
        self.index = index
        self.policy = policy
        self.clock = clock
        self.affinity = affinity
        self.matching = matching
        self.decision_log = decision_log

    async def route(
        self,
        request: RouteRequest,
        *,
        request_id: str,
        trace_id: str,
        kind: Literal["route", "invoke"] = "route",
    ) -> RouteDecision:
        """The explained decision for one request, logged; nothing is invoked."""
        policy = self.policy()
        if request.capability:
            matches = exact_match(request.capability)
        else:
            matches = await self.matching.match(request.text or "", policy)
        now = self.clock.monotonic()
        warm = self.affinity.warm_agents(request.context_id, now)
        decision = decide(
            matches,
            self.index,
            policy,
            now=now,
            warm_agents=warm,
            from_text=request.capability is None,
        )
        self.decision_log.record(decision, kind=kind, request_id=request_id, trace_id=trace_id)
        return decision
