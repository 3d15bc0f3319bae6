"""The invoke service: one request from the edge to its answer, stage by stage.

admit (`admission`: the limits in flight) -> authorize (`gate`: roles, grants,
delegation rules, kill switch, context) -> hop check -> claim (`idempotency`,
caller-chosen ids only) -> route (`route`) -> plan (`planning`, then the gate again
for the routed capability and the quotas) -> deliver (`dispatch`: the attempts and
421 redirects), or a task for asynchronous requests -> finish (`finish`: the answer,
stored for replays, and what it leaves behind). Requests that no instance could take
are parked (`parking`: 202 with a task id) and replayed later; when their time runs
out, a remembered answer is served as `degraded`, else the failure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from agent_reach.clock import Clock
from agent_reach.errors import Forbidden, HopLimit, ReachError
from agent_reach.ids import new_request_id
from agent_reach.invoke import checks
from agent_reach.invoke.admission import Admission, Limit
from agent_reach.invoke.budget import RetryBudget
from agent_reach.invoke.claim import ClaimStage
from agent_reach.invoke.deadletters import DeadLetters
from agent_reach.invoke.dispatch import Dispatcher
from agent_reach.invoke.finish import Finisher, ended_answer, error_answer
from agent_reach.invoke.gate import AccessGate
from agent_reach.invoke.idempotency import Owned
from agent_reach.invoke.parking import Parking
from agent_reach.invoke.planning import PlanStage
from agent_reach.invoke.route import RouteStage
from agent_reach.invoke.tasks import TaskBoard, TaskEntry
from agent_reach.model.decisions import RouteDecision
from agent_reach.model.invocations import InvokeRequest
from agent_reach.model.keys import ANONYMOUS, Principal
from agent_reach.observability.metrics import Metrics
from agent_reach.observability.spans import Span
from agent_reach.observability.tracecontext import TraceContext
from agent_reach.observability.tracing import Tracer
from agent_reach.policy.policy import Policy
from agent_reach.security.service import SecurityService
from agent_reach.wire.answer import Answer
from agent_reach.wire.event_stream import EventStream, StreamEnd

log = structlog.get_logger("agent_reach.invoke")


class FanoutHandler(Protocol):
    """Answers `mode: "fanout"` requests (the orchestration package provides it)."""

    def __call__(
        self,
        request: InvokeRequest,
        trace: TraceContext,
        *,
        hop_budget: int | None,
        deadline_ms: int | None,
        principal: Principal,
    ) -> Awaitable[Answer]: ...


@dataclass(frozen=True, slots=True)
class InvokeService:
    """Everything `POST /v1/invoke` does, as its stages in order; `handle` never raises,
    it answers.

    The edge authenticates the caller once (`security`: a key, an IdP token, a client
    certificate, or a delegation token and its chain) and hands its principal in; then
    admit (`admission`) -> authorize (`gate`) -> claim (`claim`) -> route (`route`) ->
    plan (`plan`, then `gate` for the routed capability and its quotas) -> deliver
    (`dispatch`) -> finish (`finish`); `parking` answers what could not be delivered.
    The observers (quality ledger, journal, decision log, mesh spending) are given to
    the stages they watch when those are built. `fanout` answers `mode: "fanout"`
    (orchestration builds it on an invoke path without one: `with_fanout`).
    """

    security: SecurityService
    admission: Admission | None
    gate: AccessGate
    claim: ClaimStage
    route: RouteStage
    plan: PlanStage
    dispatch: Dispatcher
    finish: Finisher
    parking: Parking
    tasks: TaskBoard
    dead_letters: DeadLetters
    budget: RetryBudget
    policy: Callable[[], Policy]  # the policy in force, read once per request
    clock: Clock
    metrics: Metrics
    tracer: Tracer
    fanout: FanoutHandler | None = None

    def with_fanout(self, fanout: FanoutHandler) -> InvokeService:
        """The same invoke path, answering `mode: "fanout"` with `fanout`."""
        return dataclasses.replace(self, fanout=fanout)

    async def handle(
        self,
        request: InvokeRequest,
        trace: TraceContext,
        *,
        hop_budget: int | None = None,
        deadline_ms: int | None = None,
        principal: Principal = ANONYMOUS,
        stream: bool = False,
    ) -> Answer:
        """The answer for one request at the edge (sync answer, 202 task, or error).

        `principal` must be allowed to invoke the capability (checked before anything
        else for a named capability, after routing for text) and within its quotas.
        Beyond the admission limits the answer comes at once (`invoke/admission.py`).
        With `stream`, an agent that answers an event stream makes an answer whose
        `stream` the edge relays; the request holds its admission slot, its idempotency
        claim and its span until the stream has ended (`wire/event_stream.py`).
        """
        ticket = self.admission.enter(request.capability) if self.admission else None
        if isinstance(ticket, str):
            return await self._shed(request, trace, ticket, principal)
        streamed = False
        try:
            answer = await self._admitted(
                request, trace, hop_budget, deadline_ms, principal, stream
            )
            if answer.stream is not None and self.admission is not None and ticket is not None:
                admission, held = self.admission, ticket

                async def leave(end: StreamEnd) -> None:
                    admission.leave(held)

                answer.stream.on_end(leave)
                streamed = True
            return answer
        finally:
            if self.admission is not None and ticket is not None and not streamed:
                self.admission.leave(ticket)

    async def _shed(
        self, request: InvokeRequest, trace: TraceContext, limit: Limit, principal: Principal
    ) -> Answer:
        """A request refused by admission: forbidden stays forbidden, else the refusal."""
        assert self.admission is not None  # only admission refuses
        request_id = request.request_id or new_request_id()
        started = self.clock.monotonic()
        try:
            if request.capability is not None:  # forbidden stays forbidden
                self.gate.authorize(principal, request.capability)
            answer = await self.admission.refuse(request, limit, request_id, trace.trace_id)
        except ReachError as exc:
            answer = error_answer(exc, request_id, trace)
        self.finish.shed(request, request_id, principal, trace, answer, started)
        return answer

    async def _admitted(
        self,
        request: InvokeRequest,
        trace: TraceContext,
        hop_budget: int | None,
        deadline_ms: int | None,
        principal: Principal,
        stream: bool = False,
    ) -> Answer:
        if request.mode == "fanout" and self.fanout is not None:
            return await self.fanout(
                request, trace, hop_budget=hop_budget, deadline_ms=deadline_ms, principal=principal
            )
        started = self.clock.monotonic()
        chosen_id = request.request_id  # the caller's own, claimed below
        request_id = chosen_id or new_request_id()
        span = self.tracer.start(
            "invoke",
            trace,
            request.capability or "",
            request_id,
            principal=principal.name,
            chain=principal.chain,
        )
        trace = trace.under(span.span_id)  # route and attempts are children of the invoke span
        task = TaskEntry(
            task_id=request_id,
            request=request,
            trace_id=trace.trace_id,
            hop_budget=checks.hop_budget(hop_budget, request.max_hop),
            deadline_ms=deadline_ms,
            principal=principal,
        )
        owned: Owned | None = None
        policy = self.policy()
        self.budget.start_request()
        try:
            # Access first: a request its caller may not make leaves nothing behind, not
            # even a dead letter.
            task = self.gate.authorize_request(task)
            if request.context_id is not None:
                await self.gate.authorize_context(principal, request.context_id)
            if task.hop_budget <= 0:
                await self.dead_letters.add(
                    "hop_limit",
                    request,
                    request_id=request_id,
                    trace_id=trace.trace_id,
                    hop=task.hop_budget,
                )
                raise HopLimit(
                    "the request passed through too many agents (hop budget spent)",
                    request_id=request_id,
                )
            if chosen_id is not None:
                claimed = await self.claim.claim(task, policy, started)
                if isinstance(claimed, Answer):
                    self.metrics.idempotent_replays.inc()
                    self.tracer.end(span, "replayed")
                    return claimed
                owned = claimed
                started = self.clock.monotonic()  # a wait for a dead owner used none of it
            answer, error = await self._answer(
                task, trace, policy, started, span, owned=owned, stream=stream
            )
        except ReachError as exc:
            answer, error = error_answer(exc, request_id, trace), exc
            route = exc.details.get("route")
            capability = route.capability if isinstance(route, RouteDecision) else None
            label = self.finish.label(capability or request.capability)
            self.metrics.requests.labels(label, "error").inc()
        except Exception:  # a bug, never bad input: logged, and answered as JSON, not a traceback
            log.exception("invoke_failed", request_id=request_id, trace_id=trace.trace_id)
            error = ReachError("internal error; the coordinator log has details")
            answer = error_answer(error, request_id, trace)
        finally:
            self.budget.end_request()

        if answer.stream is not None:
            answer.stream.on_end(
                lambda end: self.finish.ended(
                    ended_answer(end), end.error, task, span, policy, owned, started
                )
            )
            return answer
        if owned is not None:
            await self.finish.release(answer, error, task, policy, owned)
        self.finish.recorded(answer, error, task, span, started)
        return answer

    async def run_task(self, task: TaskEntry) -> Answer:
        """Execute a queued or suspended task now (called by the task board).

        A delegated task runs within what its chain has left (its deliveries' tokens
        expire with it); once the chain's deadline has passed it is not delivered at
        all: 504 `delegation_expired`.
        """
        trace = TraceContext(task.trace_id)
        capability = task.request.capability or ""
        span = self.tracer.start(
            "task", trace, capability, task.task_id, principal=task.principal.name
        )
        policy = self.policy()
        owned: Owned | None = None
        try:
            task = self.gate.within_chain(task)
            claimed = await self.claim.claim_run(task, policy, self.clock.monotonic())
            if isinstance(claimed, Answer):
                self.tracer.end(span, "replayed")
                return claimed
            owned = claimed
            answer, error = await self._answer(
                task,
                trace.under(span.span_id),
                policy,
                span.started,
                span,
                queued=True,
                owned=owned,
            )
        except ReachError as exc:
            self.tracer.end(span, exc.code)
            answer, error = error_answer(exc, task.task_id, trace), exc
        else:
            self.tracer.end(span)
        if owned is not None:
            await self.finish.release(answer, error, task, policy, owned)
        return answer

    async def expire_task(self, task: TaskEntry, last_failure: dict[str, Any] | None) -> Answer:
        """A parked task's time ran out (`Parking.expire`)."""
        return await self.parking.expire(task, last_failure)

    async def _answer(
        self,
        task: TaskEntry,
        trace: TraceContext,
        policy: Policy,
        started: float,
        span: Span,
        *,
        queued: bool = False,
        owned: Owned | None = None,
        stream: bool = False,
    ) -> tuple[Answer, ReachError | None]:
        """route -> plan -> deliver -> finish; sets `span`'s capability, agent and outcome
        on the way.

        The task's principal must be allowed the routed capability: checked again for
        text (the capability is known only now) and for tasks run later (rules may have
        changed), then the quota is taken for the delivery about to happen.
        """
        request = task.request
        decision = await self.route.route(task, trace, span)
        try:
            self.plan.check(task, decision)
            if decision.capability is not None:
                checked = not queued and request.capability is not None
                await self.gate.admit_routed(task.principal, decision.capability, checked=checked)
            plan = self.plan.plan(
                task, decision, trace, policy, started, queued=queued, owned=owned, stream=stream
            )
            if plan is None:
                span.status = "queued"
                return await self.tasks.accept(task, "queued"), None
            delivered = await self.dispatch.deliver(task, plan)
        except Forbidden:
            raise  # without the route: it would show what the caller may not reach
        except ReachError as exc:
            answer = await self.parking.after_failure(
                task, decision, exc, policy, span, queued=queued
            )
            return answer, None
        if isinstance(delivered.result, EventStream):
            return self.finish.streamed(task, trace, decision, delivered, policy, span), None
        return self.finish.succeeded(task, trace, decision, delivered, policy, span), None
