"""The route stage: the decision for one task.

A named capability is routed at once (after catching up with the shared registry when
it is unknown here); text waits for the matchers, and is routed among the capabilities
its caller may invoke only (the access gate's `routable`, as on `POST /v1/route`): a
text that fits best one the caller may not use goes to the best one it may use if that
one's own confidence passes the thresholds, else it is refused as `no_match` or
`ambiguous` like any text nothing fits. A delegated task's decisions say on
whose behalf and through whom (the decision log is told before routing). Whether the
decision can be delivered is the plan stage's question (`invoke/planning.py`).
"""

from __future__ import annotations

from agent_reach.invoke.gate import AccessGate
from agent_reach.invoke.tasks import TaskEntry
from agent_reach.mesh.tokens import delegation_record
from agent_reach.model.decisions import RouteDecision
from agent_reach.observability.decision_log import DecisionLog
from agent_reach.observability.spans import Span
from agent_reach.observability.tracecontext import TraceContext
from agent_reach.routing.service import RoutingService


class RouteStage:
    """Routes a task; names its span after the capability chosen."""

    def __init__(
        self, routing: RoutingService, gate: AccessGate, decision_log: DecisionLog
    ) -> None:
        self.routing = routing
        self.gate = gate
        self.decision_log = decision_log

    async def route(self, task: TaskEntry, trace: TraceContext, span: Span) -> RouteDecision:
        """The decision for `task` (it may name no agent: the plan stage says why)."""
        request, routing = task.request, self.routing
        if task.principal.chain is not None:  # its decisions say on whose behalf, through whom
            self.decision_log.note_delegation(task.task_id, delegation_record(task.principal.chain))
        if request.capability:  # named: nothing to wait for, unless unknown here
            if routing.catch_up is not None:
                await routing.caught_up(request.capability)
            decision = routing.route_named(
                request,
                request_id=task.task_id,
                trace_id=trace.trace_id,
                kind="invoke",
                parent_span_id=trace.parent_span_id,
                principal=task.principal.name,
            )
        else:
            decision = await routing.route(
                request,
                request_id=task.task_id,
                trace_id=trace.trace_id,
                kind="invoke",
                parent_span_id=trace.parent_span_id,
                principal=task.principal.name,
                allowed=self.gate.routable(task.principal),
            )
        span.name = decision.capability or span.name
        return decision
