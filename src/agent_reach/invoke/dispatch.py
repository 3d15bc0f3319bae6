"""Delivery of a routed request: its attempts, in its context, and the 421 redirects.

A request that named its capability goes straight to the attempt loop. A text request
whose agent answers 421 "not mine" is routed again without that capability (each such
redirect is one more hop), within the same deadline; nothing was done by a 421, so
nothing is re-sent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from agent_reach.context.service import ContextService
from agent_reach.errors import AgentFailed, NoMatch
from agent_reach.invoke.attempts import AttemptLoop, Delivered
from agent_reach.invoke.gate import AccessGate
from agent_reach.invoke.plan import DeliveryPlan
from agent_reach.invoke.planning import params_of
from agent_reach.invoke.spending import MeshSpending
from agent_reach.invoke.tasks import TaskEntry
from agent_reach.model.decisions import RouteDecision
from agent_reach.observability.metrics import Metrics
from agent_reach.registry.index import Instance
from agent_reach.routing.service import RoutingService

if TYPE_CHECKING:
    from agent_reach.invoke.negotiation import Negotiation
    from agent_reach.learning.service import LearningService


class Dispatcher:
    """Runs a request's delivery plan to the answer that ends it.

    `spending` (delegation tokens, the chain's budget: `invoke/spending.py`) and
    `negotiation` (offers before a delivery) take part only where they apply.
    """

    def __init__(
        self,
        attempts: AttemptLoop,
        routing: RoutingService,
        gate: AccessGate,
        contexts: ContextService,
        metrics: Metrics,
        learning: LearningService | None,
        *,
        spending: MeshSpending | None = None,
        negotiation: Negotiation | None = None,
    ) -> None:
        self.attempts = attempts
        self.routing = routing
        self.gate = gate
        self.contexts = contexts
        self.metrics = metrics
        self.learning = learning
        self.spending = spending
        self.negotiation = negotiation

    def deliver(self, task: TaskEntry, plan: DeliveryPlan) -> Awaitable[Delivered]:
        """The delivered answer; the failure that ended the attempts otherwise."""
        spending = self.spending
        if spending is not None and spending.involved(task.principal, task.request.budget):
            spending.attach(task, plan)
        negotiation = self.negotiation
        if negotiation is not None and negotiation.applies(plan.decision):
            return self._negotiated(negotiation, task, plan)
        if task.request.capability is None:
            return self._deliver_text(task, plan)
        return self._attempts(plan, task.request.context_id)  # the caller's own choice

    async def _negotiated(
        self, negotiation: Negotiation, task: TaskEntry, plan: DeliveryPlan
    ) -> Delivered:
        """Offers first (invoke/negotiation.py), then the delivery the offers chose."""
        await negotiation.negotiate(task, plan)
        if task.request.capability is None:
            return await self._deliver_text(task, plan)
        return await self._attempts(plan, task.request.context_id)

    def _attempts(self, plan: DeliveryPlan, context_id: str | None) -> Awaitable[Delivered]:
        """The attempts (a plain call without a context: one coroutine less per request)."""
        if context_id is None:
            return self.attempts.run(plan)
        return self._attempts_in_context(plan, context_id)

    async def _attempts_in_context(self, plan: DeliveryPlan, context_id: str) -> Delivered:
        """Each instance gets its own scoped context token, and the context stays
        referenced (it cannot expire) until the attempts are over."""
        request_id = plan.delivery.request_id

        async def context_of(instance: Instance) -> dict[str, Any] | None:
            return await self.contexts.delivery_context(
                context_id, instance.spec, request_id=request_id
            )

        plan.context_of = context_of
        try:
            return await self.attempts.run(plan)
        finally:
            plan.context_of = None
            await self.contexts.release(request_id)

    async def _deliver_text(self, task: TaskEntry, plan: DeliveryPlan) -> Delivered:
        """Deliver; on a 421, remember the negative and deliver the text's next route."""
        request = task.request
        earlier: list[Any] = []
        refused: set[str] = set()
        while True:
            try:
                delivered = await self._attempts(plan, request.context_id)
            except AgentFailed as exc:
                if exc.http_status != 421:
                    raise
                delivery = plan.delivery
                earlier = _numbered(earlier, exc.attempts)
                refused.add(delivery.capability)
                if self.learning is not None and request.text:
                    await self.learning.misdirected(
                        task.task_id, task.principal.name, request.text, delivery.capability
                    )
                decision = await self._redirect(task, plan, refused, exc, earlier)
                plan.decision = decision
                plan.delivery = dataclasses.replace(
                    delivery,
                    capability=decision.capability or "",
                    hop=delivery.hop - 1,
                    params=params_of(self.routing.index, decision, request),
                )
                if self.negotiation is not None and self.negotiation.applies(decision):
                    await self.negotiation.negotiate(task, plan)
                continue
            if earlier:
                delivered.attempts = _numbered(earlier, delivered.attempts)
            return delivered

    async def _redirect(
        self,
        task: TaskEntry,
        plan: DeliveryPlan,
        refused: set[str],
        failure: AgentFailed,
        attempts: list[Any],
    ) -> RouteDecision:
        """The decision for the text once `refused` said "not mine"; NoMatch when none."""
        decision = None
        if plan.delivery.hop >= 1:
            decision = await self.routing.route(
                task.request,
                request_id=task.task_id,
                trace_id=plan.trace.trace_id,
                kind="invoke",
                parent_span_id=plan.trace.parent_span_id,
                principal=task.principal.name,
                allowed=self.gate.routable(task.principal),
            )
        if decision is None or decision.capability is None or decision.capability in refused:
            self.metrics.misdirected.labels("refused").inc()
            refusal = NoMatch(
                "the agents of every capability that fits the text answered 421 (not mine)",
                request_id=task.task_id,
                attempts=attempts,
                misdirected=sorted(refused),
                last_failure=failure.code,
            )
            if decision is not None:
                refusal.details["route"] = decision
            raise refusal
        await self.gate.admit_routed(task.principal, decision.capability, checked=False)
        self.metrics.misdirected.labels("redirected").inc()
        return decision


def _numbered(earlier: list[Any], later: list[Any]) -> list[Any]:
    """Attempts of successive deliveries as one list, numbered on."""
    return [
        *earlier,
        *(dataclasses.replace(a, number=len(earlier) + n + 1) for n, a in enumerate(later)),
    ]
