"""Mesh spending, attached to a delivery plan: the deliveries' delegation tokens and
what they cost the chain's budget.

A request whose deliveries concern the mesh (a chain, a budget, a delegate rule, or an
agent that asked for tokens: `Mesh.involved`) gets two hooks on its plan. Per instance
tried, its declared cost is spent from the chain's budget (403 `budget_exhausted`
before anything is sent) and the delegation token it is to carry is signed; per
answer with `X-Reach-Cost`, what it reported over its declared cost is spent too.
Any other request's delivery does not look at the mesh at all.
"""

from __future__ import annotations

from typing import Any

from agent_reach.clock import Clock
from agent_reach.invoke.plan import DelegationOf, DeliveryPlan, ReportedCost
from agent_reach.invoke.tasks import TaskEntry
from agent_reach.mesh.service import Mesh
from agent_reach.registry.index import Instance


class MeshSpending:
    """Attaches the mesh's hooks to the plans of the requests it concerns."""

    def __init__(self, mesh: Mesh, clock: Clock) -> None:
        self.mesh = mesh
        self.clock = clock
        self.involved = mesh.involved  # (principal, budget) -> whether to `attach`

    def attach(self, task: TaskEntry, plan: DeliveryPlan) -> None:
        """The plan's delegation and reported-cost hooks, for this task."""
        plan.delegation_of = self._delegation_of(task, plan)
        plan.reported_cost = self._reported_cost(task)

    def _delegation_of(self, task: TaskEntry, plan: DeliveryPlan) -> DelegationOf:
        """Per instance tried: spend its cost from the chain's budget, then the token."""
        mesh, principal, request, clock = self.mesh, task.principal, task.request, self.clock

        async def delegation_of(instance: Instance) -> dict[str, Any] | None:
            await mesh.spend(principal, task.task_id, request.budget, instance.spec.cost)
            if not mesh.carries_token(principal, instance):
                return None
            return await mesh.delegation_for(
                principal,
                instance,
                plan.delivery.capability,
                request_id=task.task_id,
                hop=plan.delivery.hop,
                deadline_s=max(0.0, plan.deadline - clock.monotonic()),
                context_id=request.context_id,
                budget=request.budget,
            )

        return delegation_of

    def _reported_cost(self, task: TaskEntry) -> ReportedCost:
        """Per answer with `X-Reach-Cost`: spend what it reported over the declared cost."""
        mesh = self.mesh

        async def reported_cost(instance: Instance, cost: float) -> None:
            await mesh.spend_reported(
                task.principal, task.task_id, task.request.budget, cost - instance.spec.cost
            )

        return reported_cost
