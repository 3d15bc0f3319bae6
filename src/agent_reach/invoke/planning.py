"""The plan stage: a routed request checked, and its delivery planned once.

Between the route and the delivery: a decision that names no agent ends here with
the error that says why, a payload that breaks the capability's `input_schema` gets
its 422, and the timeout class fixes the deadline. A request the caller asked to run
asynchronously, or whose class is asynchronous, gets no plan: it becomes a task.
"""

from __future__ import annotations

from typing import Any

from agent_reach.errors import ValidationFailed
from agent_reach.invoke import checks
from agent_reach.invoke.idempotency import Owned
from agent_reach.invoke.plan import DeliveryPlan
from agent_reach.invoke.schemas import PayloadSchemas
from agent_reach.invoke.tasks import TaskEntry
from agent_reach.model.decisions import RouteDecision
from agent_reach.model.delivery import Delivery
from agent_reach.model.invocations import InvokeRequest
from agent_reach.observability.tracecontext import TraceContext
from agent_reach.policy.policy import Policy, TimeoutClassPolicy
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.params import schema_of, with_payload


class PlanStage:
    """Checks a decision against the request, and plans its delivery."""

    def __init__(self, index: RegistryIndex) -> None:
        self.index = index
        self.schemas = PayloadSchemas()

    def check(self, task: TaskEntry, decision: RouteDecision) -> None:
        """Nothing to deliver to (`NoInstance`, `Ambiguous`, `NoMatch`, `NoCapability`),
        or a payload the capability's schema refuses (422)."""
        checks.check_routable(decision, task.request, task.task_id, self.index)
        checks.check_payload(self.schemas, self.index, decision, task.request)

    def plan(
        self,
        task: TaskEntry,
        decision: RouteDecision,
        trace: TraceContext,
        policy: Policy,
        started: float,
        *,
        queued: bool,
        owned: Owned | None,
        stream: bool,
    ) -> DeliveryPlan | None:
        """The delivery's plan; None when the request is to run as a task instead
        (`queued`: it is that task, running now)."""
        request = task.request
        timeout_class = timeout_class_of(policy, request, decision, self.index)
        if not queued and (request.mode == "async" or timeout_class.asynchronous):
            return None
        deadline = started + deadline_s(task.deadline_ms, policy, timeout_class)
        delivery = Delivery(
            request_id=task.task_id,
            capability=decision.capability or "",
            payload=request.payload,
            trace_id=trace.trace_id,
            hop=task.hop_budget - 1,
            text=request.text,  # the caller's words, whether or not they chose the route
            params=params_of(self.index, decision, request),
            stream=stream,
        )
        return DeliveryPlan(
            decision,
            delivery,
            trace,
            timeout_class,
            deadline,
            policy.delivery,
            owned,
        )


def params_of(
    index: RegistryIndex, decision: RouteDecision, request: InvokeRequest
) -> dict[str, Any] | None:
    """The params pulled out of the text, with the caller's own payload fields kept."""
    text = decision.text
    if text is None or text.params is None or decision.capability is None:
        return None
    schema = schema_of(index, decision.capability)
    return with_payload(text.params, schema or {}, request.payload)


def timeout_class_of(
    policy: Policy, request: InvokeRequest, decision: RouteDecision, index: RegistryIndex
) -> TimeoutClassPolicy:
    """The class the caller asked for, else the chosen instance's, else `query`."""
    name = request.timeout_class
    if name is None:
        instance = index.by_id.get(decision.agent_id or "")
        name = instance.spec.timeout_class if instance else "query"
    timeout_class = policy.timeout_classes.get(name)
    if timeout_class is None:
        raise ValidationFailed(
            f"unknown timeout class {name!r}: use one of {sorted(policy.timeout_classes)}",
            field="timeout_class",
        )
    return timeout_class


def deadline_s(deadline_ms: int | None, policy: Policy, timeout_class: TimeoutClassPolicy) -> float:
    """The class's whole-request budget, shortened by the caller's own deadline."""
    budget = policy.deadline_s(timeout_class)
    return budget if deadline_ms is None else min(budget, deadline_ms / 1000)
