"""The invoker: route a request, deliver it to the chosen instance, record how it went."""

from __future__ import annotations

import uuid

from agent_reach.clock import Clock
from agent_reach.errors import (
    AgentFailed,
    Ambiguous,
    HopLimit,
    NoCapability,
    NoInstance,
    NoMatch,
    ValidationFailed,
)
from agent_reach.invoke.delivery import Delivery
from agent_reach.invoke.transports import Transports
from agent_reach.model.decisions import RouteDecision
from agent_reach.model.invocations import DEFAULT_MAX_HOP, Attempt, InvokeRequest, InvokeResult
from agent_reach.observability.tracecontext import TraceContext
from agent_reach.registry.index import Instance, RegistryIndex
from agent_reach.routing.policy import TimeoutClassPolicy
from agent_reach.routing.service import RoutingService


class Invoker:
    """Route + deliver + record: the hot path of `POST /v1/invoke`."""

    def __init__(
        self, routing: RoutingService, index: RegistryIndex, transports: Transports, clock: Clock
    ) -> None:
        self.routing = routing
        self.index = index
        self.transports = transports
        self.clock = clock

    async def invoke(
        self, request: InvokeRequest, trace: TraceContext, *, hop_budget: int | None = None
    ) -> InvokeResult:
        """Deliver once to the best live instance; failures raise with the attempt attached."""
        request_id = request.request_id or uuid.uuid4().hex
        budget = _hop_budget(hop_budget, request.max_hop)
        if budget <= 0:
            raise HopLimit(
                "the request passed through too many agents (hop budget spent)",
                request_id=request_id,
                trace_id=trace.trace_id,
            )
        decision = await self.routing.route(
            request, request_id=request_id, trace_id=trace.trace_id, kind="invoke"
        )
        instance = self._chosen(decision, request_id, trace, from_text=request.capability is None)
        timeout = self._timeout_class(request.timeout_class or instance.spec.timeout_class)
        delivery = Delivery(
            request_id=request_id,
            capability=decision.capability or "",
            payload=request.payload,
            trace_id=trace.trace_id,
            hop=budget - 1,
        )
        result, attempt = await self._attempt(instance, delivery, trace, timeout.timeout_s)
        if request.context_id:
            self.routing.affinity.record(request.context_id, instance.id, self.clock.monotonic())
        return InvokeResult(
            request_id=request_id,
            trace_id=trace.trace_id,
            status="ok",
            agent_id=instance.id,
            result=result,
            route=decision,
            attempts=[attempt],
        )

    async def _attempt(
        self, instance: Instance, delivery: Delivery, trace: TraceContext, timeout_s: float
    ) -> tuple[object, Attempt]:
        spec = instance.spec
        transport = self.transports.get(spec.transport.type)
        _, traceparent = trace.child_traceparent()
        window = instance.stats
        window.in_flight += 1
        started = self.clock.monotonic()
        try:
            result = await transport.deliver(
                spec.transport, delivery, traceparent=traceparent, timeout_s=timeout_s
            )
        except AgentFailed as exc:
            elapsed_ms = (self.clock.monotonic() - started) * 1000
            window.record(ok=False, latency_ms=elapsed_ms)
            attempt = Attempt(
                spec.id,
                1,
                exc.code,
                round(elapsed_ms, 3),
                exc.details.get("http_status"),
                exc.message,
            )
            exc.details.update(
                request_id=delivery.request_id,
                trace_id=trace.trace_id,
                agent_id=spec.id,
                attempts=[attempt],
            )
            raise
        finally:
            window.in_flight -= 1
        elapsed_ms = (self.clock.monotonic() - started) * 1000
        window.record(ok=True, latency_ms=elapsed_ms)
        return result, Attempt(spec.id, 1, "ok", round(elapsed_ms, 3), None, None)

    def _chosen(
        self, decision: RouteDecision, request_id: str, trace: TraceContext, *, from_text: bool
    ) -> Instance:
        instance = self.index.by_id.get(decision.agent_id) if decision.agent_id else None
        if instance is not None:
            return instance
        details = {"request_id": request_id, "trace_id": trace.trace_id, "route": decision}
        if decision.rule == "no_instance":
            raise NoInstance("no live instance offers the capability right now", **details)
        if decision.rule == "margin":
            raise Ambiguous("the text fits several capabilities too equally to choose", **details)
        if from_text:
            raise NoMatch("the text fits no registered capability well enough", **details)
        raise NoCapability("no registered agent offers the capability", **details)

    def _timeout_class(self, name: str) -> TimeoutClassPolicy:
        classes = self.routing.policy().timeout_classes
        policy = classes.get(name)
        if policy is None:
            raise ValidationFailed(
                f"unknown timeout class {name!r}: use one of {sorted(classes)}",
                field="timeout_class",
            )
        return policy


def _hop_budget(from_header: int | None, from_body: int | None) -> int:
    """The smaller of the budget an agent passed on and the one the body asks for."""
    given = [b for b in (from_header, from_body) if b is not None]
    return min(given) if given else DEFAULT_MAX_HOP
