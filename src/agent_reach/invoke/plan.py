"""A routed request's delivery, planned once: what each of its attempts needs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agent_reach.invoke.idempotency import Owned
from agent_reach.model.decisions import RouteDecision
from agent_reach.model.delivery import Delivery
from agent_reach.observability.tracecontext import TraceContext
from agent_reach.policy.delivery import DeliveryPolicy, TimeoutClassPolicy
from agent_reach.registry.index import Instance

# An instance's own context block (a token scoped to its `context_fields`), or None.
ContextOf = Callable[[Instance], Awaitable[dict[str, Any] | None]]
# An instance's delegation block (mesh/service.py), or None; may refuse the delivery
# (403 budget_exhausted) before anything is sent.
DelegationOf = Callable[[Instance], Awaitable[dict[str, Any] | None]]
# Spends what an instance reported its answer cost (`X-Reach-Cost`) from the chain's budget.
ReportedCost = Callable[[Instance, float], Awaitable[None]]


@dataclass(slots=True)
class DeliveryPlan:
    """The decision, the delivery and the limits its attempts run under.

    A text request that an agent answers with 421 is routed again: its plan then
    names the new decision and delivery. `owned`, for a caller's request id: the
    instances it may already have reached go first, and each instance is noted in
    the id's record before it is sent the request.
    """

    decision: RouteDecision
    delivery: Delivery
    trace: TraceContext
    timeout_class: TimeoutClassPolicy
    deadline: float  # monotonic seconds: the whole request's, retries included
    policy: DeliveryPolicy
    owned: Owned | None = None
    context_of: ContextOf | None = None
    delegation_of: DelegationOf | None = None
    reported_cost: ReportedCost | None = None
