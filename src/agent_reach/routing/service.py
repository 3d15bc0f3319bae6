"""The routing service: turn a request into matched capabilities, then into a decision."""

from __future__ import annotations

from collections.abc import Callable

from agent_reach.clock import Clock
from agent_reach.model.decisions import RouteDecision
from agent_reach.model.invocations import RouteRequest
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.affinity import AffinityTable
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
    ) -> None:
        self.index = index
        self.policy = policy
        self.clock = clock
        self.affinity = affinity

    async def route(self, request: RouteRequest) -> RouteDecision:
        """The explained decision for one request; nothing is invoked."""
        now = self.clock.monotonic()
        matches = exact_match(request.capability) if request.capability else []
        warm = self.affinity.warm_agents(request.context_id, now)
        return decide(matches, self.index, self.policy(), now=now, warm_agents=warm)
