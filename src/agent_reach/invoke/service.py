"""The invoke service: one request from the edge to its answer.

hop check -> idempotency claim (caller-chosen ids only) -> route -> synchronous
attempts, or a task for asynchronous requests -> the answer, stored for replays.
Requests that no instance could take are suspended (202 with a task id) and
replayed later; when their time runs out, a remembered answer is served as
`degraded`, else the failure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol

import orjson
import structlog

from agent_reach.clock import Clock
from agent_reach.context.service import ContextService
from agent_reach.errors import (
    AgentFailed,
    Ambiguous,
    Forbidden,
    HopLimit,
    NoCapability,
    NoInstance,
    NoMatch,
    ReachError,
    ValidationFailed,
)
from agent_reach.ids import new_request_id
from agent_reach.invoke.admission import Admission, Limit
from agent_reach.invoke.answer import Answer
from agent_reach.invoke.answers import AnswerMemory
from agent_reach.invoke.attempts import AttemptLoop, Delivered
from agent_reach.invoke.budget import RetryBudget
from agent_reach.invoke.deadletters import DeadLetters
from agent_reach.invoke.delivery import Delivery
from agent_reach.invoke.idempotency import IdempotencyGuard, Owned, is_final
from agent_reach.invoke.schemas import PayloadSchemas, spec_schema
from agent_reach.invoke.similar_answers import SimilarAnswers
from agent_reach.invoke.streaming import EventStream, StreamEnd
from agent_reach.invoke.tasks import TaskBoard, TaskEntry
from agent_reach.model.decisions import RouteDecision
from agent_reach.model.invocations import DEFAULT_MAX_HOP, InvokeRequest, InvokeResult, Status
from agent_reach.model.keys import ANONYMOUS, Principal
from agent_reach.observability.metrics import Metrics
from agent_reach.observability.spans import Span
from agent_reach.observability.tracecontext import TraceContext
from agent_reach.observability.tracing import Tracer
from agent_reach.registry.index import Instance
from agent_reach.registry.monitor import HealthMonitor
from agent_reach.routing.params import schema_of, with_payload
from agent_reach.routing.policy import RoutingPolicy, TimeoutClassPolicy
from agent_reach.routing.service import RoutingService
from agent_reach.security.ownership import require_not_observer
from agent_reach.security.service import SecurityService
from agent_reach.troubleshooting.journal import RequestJournal

if TYPE_CHECKING:
    from agent_reach.learning.service import LearningService

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


class InvokeService:
    """Everything `POST /v1/invoke` does; `handle` never raises, it answers."""

    def __init__(
        self,
        *,
        routing: RoutingService,
        attempts: AttemptLoop,
        guard: IdempotencyGuard,
        tasks: TaskBoard,
        dead_letters: DeadLetters,
        answers: AnswerMemory,
        health: HealthMonitor,
        budget: RetryBudget,
        clock: Clock,
        metrics: Metrics,
        tracer: Tracer,
        security: SecurityService,
        contexts: ContextService,
        learning: LearningService | None = None,
        journal: RequestJournal | None = None,
        admission: Admission | None = None,
        similar: SimilarAnswers | None = None,
    ) -> None:
        self.routing = routing
        self.attempts = attempts
        self.guard = guard
        self.tasks = tasks
        self.dead_letters = dead_letters
        self.answers = answers
        self.health = health
        self.budget = budget
        self.clock = clock
        self.metrics = metrics
        self.tracer = tracer
        self.security = security
        self.contexts = contexts
        self.schemas = PayloadSchemas()
        self.learning = learning
        self.journal = journal  # what `agent-reach why` reads back
        self.admission = admission
        self.similar = similar
        self.fanout: FanoutHandler | None = None  # set once orchestration is wired in

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
        claim and its span until the stream has ended (`invoke/streaming.py`).
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
            if request.capability is not None:
                self.security.authorize_invoke(principal, request.capability)
            answer = await self.admission.refuse(request, limit, request_id, trace.trace_id)
        except ReachError as exc:
            answer = _error_answer(exc, request_id, trace)
        if self.journal is not None:
            self.journal.record(
                request_id, principal, trace.trace_id, request.context_id, answer, started
            )
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
        request_id = request.request_id or new_request_id()
        span = self.tracer.start(
            "invoke", trace, request.capability or "", request_id, principal=principal.name
        )
        trace = trace.under(span.span_id)  # route and attempts are children of the invoke span
        hops = _hop_budget(hop_budget, request.max_hop)
        task = TaskEntry(
            task_id=request_id,
            request=request,
            trace_id=trace.trace_id,
            hop_budget=hops,
            deadline_ms=deadline_ms,
            principal=principal,
        )
        owned: Owned | None = None
        policy = self.routing.policy()
        self.budget.start_request()
        try:
            # Access first: a request its caller may not make leaves nothing behind, not
            # even a dead letter.
            require_not_observer(principal, "invoke")
            if request.capability is not None:
                self.security.authorize_invoke(principal, request.capability)
            if request.context_id is not None:  # refused (404) before anything is delivered
                await self.contexts.check_use(principal, request.context_id)
            if hops <= 0:
                await self.dead_letters.add(
                    "hop_limit", request, request_id=request_id, trace_id=trace.trace_id, hop=hops
                )
                raise HopLimit(
                    "the request passed through too many agents (hop budget spent)",
                    request_id=request_id,
                )
            if request.request_id is not None:
                claimed = await self.guard.claim(
                    request,
                    task.key,
                    lease_s=policy.longest_deadline_s,
                    deadline=started + _wait_limit_s(deadline_ms, policy),
                    wait=request.on_duplicate == "wait",
                )
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
            answer, error = _error_answer(exc, request_id, trace), exc
            route = exc.details.get("route")
            capability = route.capability if isinstance(route, RouteDecision) else None
            label = self._label(capability or request.capability)
            self.metrics.requests.labels(label, "error").inc()
        except Exception:  # a bug, never bad input: logged, and answered as JSON, not a traceback
            log.exception("invoke_failed", request_id=request_id, trace_id=trace.trace_id)
            error = ReachError("internal error; the coordinator log has details")
            answer = _error_answer(error, request_id, trace)
        finally:
            self.budget.end_request()

        if answer.stream is not None:
            answer.stream.on_end(
                lambda end: self._close(
                    _ended_answer(end), end.error, task, span, policy, owned, started
                )
            )
            return answer
        if owned is not None:
            await self._release(answer, error, task, policy, owned)
        self._recorded(answer, error, task, span, started)
        return answer

    async def _close(
        self,
        answer: Answer,
        error: ReachError | None,
        task: TaskEntry,
        span: Span,
        policy: RoutingPolicy,
        owned: Owned | None,
        started: float,
    ) -> None:
        """A streamed request has ended: its claim released, then it is recorded."""
        if owned is not None:
            await self._release(answer, error, task, policy, owned)
        self._recorded(answer, error, task, span, started)

    async def _release(
        self,
        answer: Answer,
        error: ReachError | None,
        task: TaskEntry,
        policy: RoutingPolicy,
        owned: Owned,
    ) -> None:
        """The caller's request id is done: its answer is kept for replays (or given up)."""
        await self.guard.finish(
            task.key,
            owned.fence,
            answer,
            keep=is_final(error) or answer.status == 202,
            ttl_s=policy.delivery.idempotency_ttl_s,
        )

    def _recorded(
        self, answer: Answer, error: ReachError | None, task: TaskEntry, span: Span, started: float
    ) -> None:
        """The request's latency, its invoke span and its journal entry."""
        self.metrics.request_seconds_of(self._label(span.name)).observe(
            self.clock.monotonic() - started
        )
        self.tracer.end(span, error.code if error is not None else None)
        if self.journal is not None:
            self.journal.record(
                task.task_id,
                task.principal,
                task.trace_id,
                task.request.context_id,
                answer,
                started,
            )

    async def run_task(self, task: TaskEntry) -> Answer:
        """Execute a queued or suspended task now (called by the task board)."""
        trace = TraceContext(task.trace_id)
        capability = task.request.capability or ""
        span = self.tracer.start(
            "task", trace, capability, task.task_id, principal=task.principal.name
        )
        policy = self.routing.policy()
        try:
            answer, _ = await self._answer(
                task, trace.under(span.span_id), policy, span.started, span, queued=True
            )
        except ReachError as exc:
            self.tracer.end(span, exc.code)
            return _error_answer(exc, task.task_id, trace)
        self.tracer.end(span)
        return answer

    async def expire_task(self, task: TaskEntry) -> Answer:
        """A suspended task's time ran out: a remembered answer as `degraded`, else 503."""
        capability = task.request.capability
        remembered = (
            await self.answers.recall(capability, task.request.payload) if capability else None
        )
        self.tracer.end(
            self.tracer.start(
                "task",
                TraceContext(task.trace_id),
                capability or "",
                task.task_id,
                principal=task.principal.name,
            ),
            "no_instance" if remembered is None else "degraded",
        )
        if remembered is None:
            self.metrics.requests.labels(capability or "", "error").inc()
            return _error_answer(
                NoInstance("no instance became available before the suspended request expired"),
                task.task_id,
                TraceContext(task.trace_id),
            )
        self.metrics.fallbacks.labels("degraded").inc()
        self.metrics.requests.labels(capability or "", "degraded").inc()
        return Answer.of(
            200,
            {
                "request_id": task.task_id,
                "trace_id": task.trace_id,
                "status": "degraded",
                "agent_id": None,
                "result": remembered,
                "route": None,
                "attempts": [],
            },
        )

    async def _answer(
        self,
        task: TaskEntry,
        trace: TraceContext,
        policy: RoutingPolicy,
        started: float,
        span: Span,
        *,
        queued: bool = False,
        owned: Owned | None = None,
        stream: bool = False,
    ) -> tuple[Answer, ReachError | None]:
        """The answer once routed; sets `span`'s capability, agent and outcome on the way.

        The task's principal must be allowed the routed capability: checked here for text
        (the capability is known only now) and for tasks run later (rules may have
        changed), then the quota is taken for the delivery about to happen.
        """
        request = task.request
        if request.capability:  # named: nothing to wait for
            decision = self.routing.route_named(
                request,
                request_id=task.task_id,
                trace_id=trace.trace_id,
                kind="invoke",
                parent_span_id=trace.parent_span_id,
                principal=task.principal.name,
            )
        else:
            decision = await self.routing.route(
                request,
                request_id=task.task_id,
                trace_id=trace.trace_id,
                kind="invoke",
                parent_span_id=trace.parent_span_id,
                principal=task.principal.name,
            )
        span.name = decision.capability or span.name
        try:
            self._check_routable(decision, request, task.task_id)
            self._check_payload(decision, request)
            if decision.capability is not None:
                if queued or request.capability is None:
                    self.security.authorize_invoke(task.principal, decision.capability)
                await self.security.admit(task.principal, decision.capability)
            timeout_class = _timeout_class(policy, request, decision, self.routing)
            if not queued and (request.mode == "async" or timeout_class.asynchronous):
                span.status = "queued"
                return await self.tasks.accept(task, "queued"), None
            deadline = started + _deadline_s(task.deadline_ms, policy, timeout_class)
            delivery = Delivery(
                request_id=task.task_id,
                capability=decision.capability or "",
                payload=request.payload,
                trace_id=trace.trace_id,
                hop=task.hop_budget - 1,
                text=request.text,  # the caller's words, whether or not they chose the route
                params=self._params(decision, request),
                stream=stream,
            )
            if request.capability is not None:  # the caller's own choice: no 421 redirects
                delivered = await self._deliver(
                    decision,
                    delivery,
                    trace,
                    timeout_class,
                    deadline,
                    policy,
                    request.context_id,
                    owned,
                )
            else:
                delivered = await self._deliver_text(
                    task, decision, delivery, trace, timeout_class, deadline, policy, owned
                )
        except NoInstance as exc:
            if queued or not request.suspend or policy.delivery.suspend_s <= 0:
                exc.details.setdefault("route", decision)  # as every other failure after routing
                similar = await self._similar_answer(task, decision, exc)
                if similar is None:
                    raise
                span.status = "degraded"
                return similar, None
            capability = decision.capability or request.capability or ""
            self.health.probe_soon(list(exc.details.get("tried", [])))
            self.metrics.fallbacks.labels("suspended").inc()
            self.metrics.requests.labels(capability, "suspended").inc()
            log.info("request_suspended", request_id=task.task_id, capability=capability)
            span.status = "suspended"
            answer = await self.tasks.accept(task, "suspended", suspend_s=policy.delivery.suspend_s)
            return answer, None
        except Forbidden:
            raise  # without the route: it would show what the caller may not reach
        except ReachError as exc:
            exc.details.setdefault("route", decision)
            similar = await self._similar_answer(task, decision, exc)
            if similar is None:
                raise
            span.status = "degraded"
            return similar, None
        if isinstance(delivered.result, EventStream):
            return self._streamed(task, trace, decision, delivered, policy, span), None
        return self._succeeded(task, trace, decision, delivered, policy, span), None

    def _succeeded(
        self,
        task: TaskEntry,
        trace: TraceContext,
        decision: RouteDecision,
        delivered: Delivered,
        policy: RoutingPolicy,
        span: Span,
    ) -> Answer:
        """A delivered answer: what the router learns of it, and the caller's answer."""
        request = task.request
        self._learn_weights(decision, delivered, policy)
        status: Status = "ok" if delivered.instance.id == decision.agent_id else "fallback"
        if request.context_id:
            self.routing.affinity.record(
                request.context_id, delivered.instance.id, self.clock.monotonic()
            )
        if policy.delivery.degraded_answers and decision.capability:
            self.answers.remember(
                decision.capability, request.payload, delivered.result, policy.delivery.answer_ttl_s
            )
        if self.similar is not None and request.text and decision.capability:
            self.similar.remember(decision.capability, request.text, task.task_id, delivered.result)
        self.metrics.child(self.metrics.requests, decision.capability or "", status).inc()
        span.status, span.agent_id = status, delivered.instance.id
        result = InvokeResult(
            request_id=task.task_id,
            trace_id=trace.trace_id,
            status=status,
            agent_id=delivered.instance.id,
            result=delivered.result,
            route=decision,
            attempts=delivered.attempts,
            normalized=delivered.normalized,
        )
        return Answer.of(200, result)

    def _streamed(
        self,
        task: TaskEntry,
        trace: TraceContext,
        decision: RouteDecision,
        delivered: Delivered,
        policy: RoutingPolicy,
        span: Span,
    ) -> Answer:
        """An answer being streamed: once it ends, its assembled events are the result
        (learnt, remembered, stored for replays) and the last event carries the answer."""
        stream: EventStream = delivered.result

        async def ended(end: StreamEnd) -> None:
            if end.error is None:
                delivered.result = end.result
                answer = self._succeeded(task, trace, decision, delivered, policy, span)
                end.document = orjson.loads(answer.body)
                return
            error = end.error
            error.details.setdefault("route", decision)
            error.details["attempts"] = delivered.attempts
            self.metrics.requests.labels(self._label(decision.capability), "error").inc()
            span.status, span.agent_id = "error", delivered.instance.id
            error.details.setdefault("request_id", task.task_id)
            error.details.setdefault("trace_id", trace.trace_id)
            end.document = error.to_body()

        stream.on_end(ended)
        return Answer(200, b"", stream=stream)

    def _learn_weights(
        self, decision: RouteDecision, delivered: Delivered, policy: RoutingPolicy
    ) -> None:
        """Each attempt's outcome teaches the factor weights (when they adapt)."""
        if not policy.adaptation.enabled:
            return
        for attempt in delivered.attempts:
            self.routing.adaptation.record(
                decision, attempt.agent_id, ok=attempt.outcome == "ok", policy=policy
            )

    def _params(self, decision: RouteDecision, request: InvokeRequest) -> dict[str, Any] | None:
        """The params pulled out of the text, with the caller's own payload fields kept."""
        text = decision.text
        if text is None or text.params is None or decision.capability is None:
            return None
        schema = schema_of(self.routing.index, decision.capability)
        return with_payload(text.params, schema or {}, request.payload)

    async def _deliver_text(
        self,
        task: TaskEntry,
        decision: RouteDecision,
        delivery: Delivery,
        trace: TraceContext,
        timeout_class: TimeoutClassPolicy,
        deadline: float,
        policy: RoutingPolicy,
        owned: Owned | None,
    ) -> Delivered:
        """Deliver; when an agent answers a text request with 421 "not mine", remember the
        negative and route the text again without that capability (each such redirect is
        one more hop), within the same deadline. Nothing was done by a 421: no re-send."""
        request = task.request
        earlier: list[Any] = []
        refused: set[str] = set()
        while True:
            try:
                delivered = await self._deliver(
                    decision,
                    delivery,
                    trace,
                    timeout_class,
                    deadline,
                    policy,
                    request.context_id,
                    owned,
                )
            except AgentFailed as exc:
                if request.capability is not None or exc.details.get("http_status") != 421:
                    raise
                earlier = _numbered(earlier, exc.details.get("attempts", []))
                refused.add(delivery.capability)
                if self.learning is not None and request.text:
                    await self.learning.misdirected(
                        task.task_id, task.principal.name, request.text, delivery.capability
                    )
                decision = await self._redirect(task, trace, refused, delivery.hop, exc, earlier)
                delivery = dataclasses.replace(
                    delivery,
                    capability=decision.capability or "",
                    hop=delivery.hop - 1,
                    params=self._params(decision, request),
                )
                continue
            if earlier:
                delivered.attempts = _numbered(earlier, delivered.attempts)
            return delivered

    async def _redirect(
        self,
        task: TaskEntry,
        trace: TraceContext,
        refused: set[str],
        hop: int,
        failure: AgentFailed,
        attempts: list[Any],
    ) -> RouteDecision:
        """The decision for the text once `refused` said "not mine"; NoMatch when none."""
        decision = None
        if hop >= 1:
            decision = await self.routing.route(
                task.request,
                request_id=task.task_id,
                trace_id=trace.trace_id,
                kind="invoke",
                parent_span_id=trace.parent_span_id,
                principal=task.principal.name,
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
        self.security.authorize_invoke(task.principal, decision.capability)
        await self.security.admit(task.principal, decision.capability)
        self.metrics.misdirected.labels("redirected").inc()
        return decision

    def _deliver(
        self,
        decision: RouteDecision,
        delivery: Delivery,
        trace: TraceContext,
        timeout_class: TimeoutClassPolicy,
        deadline: float,
        policy: RoutingPolicy,
        context_id: str | None,
        owned: Owned | None,
    ) -> Awaitable[Delivered]:
        """The attempts (a plain call without a context: one coroutine less per request)."""
        if context_id is None:
            return self.attempts.run(
                decision,
                delivery,
                trace,
                timeout_class=timeout_class,
                deadline=deadline,
                policy=policy.delivery,
                owned=owned,
            )
        return self._deliver_in_context(
            decision, delivery, trace, timeout_class, deadline, policy, context_id, owned
        )

    async def _deliver_in_context(
        self,
        decision: RouteDecision,
        delivery: Delivery,
        trace: TraceContext,
        timeout_class: TimeoutClassPolicy,
        deadline: float,
        policy: RoutingPolicy,
        context_id: str,
        owned: Owned | None,
    ) -> Delivered:
        """Each instance gets its own scoped context token, and the context stays
        referenced (it cannot expire) until the attempts are over."""
        request_id = delivery.request_id

        async def context_of(instance: Instance) -> dict[str, Any] | None:
            return await self.contexts.delivery_context(
                context_id, instance.spec, request_id=request_id
            )

        try:
            return await self.attempts.run(
                decision,
                delivery,
                trace,
                timeout_class=timeout_class,
                deadline=deadline,
                policy=policy.delivery,
                context_of=context_of,
                owned=owned,
            )
        finally:
            await self.contexts.release(request_id)

    async def _similar_answer(
        self, task: TaskEntry, decision: RouteDecision, error: ReachError
    ) -> Answer | None:
        """A text request whose delivery failed: the closest earlier answer, `degraded`."""
        if self.similar is None or not task.request.text or not decision.capability:
            return None
        return await self.similar.fallback(task, decision, error)

    def _label(self, capability: str | None) -> str:
        """A metric label: registered capabilities by name, anything else as one value
        (callers' typos must not grow the metrics without bound)."""
        return capability if capability in self.routing.index.by_capability else "(unknown)"

    def _check_payload(self, decision: RouteDecision, request: InvokeRequest) -> None:
        """422 before any delivery when the payload breaks the capability's `input_schema`.

        A text request without a payload is not checked: its words are the input.
        """
        instance = self.routing.index.by_id.get(decision.agent_id or "")
        if instance is None or decision.capability is None:
            return
        if request.payload is None and request.capability is None:
            return
        schema = spec_schema(instance.spec, decision.capability)
        if schema is not None:
            self.schemas.check(schema, request.payload, decision.capability)

    @staticmethod
    def _check_routable(decision: RouteDecision, request: InvokeRequest, request_id: str) -> None:
        if decision.agent_id is not None:
            return
        details: dict[str, Any] = {"request_id": request_id, "route": decision}
        if decision.rule == "no_instance":
            raise NoInstance(
                "no live instance offers the capability right now", retry_after_s=1, **details
            )
        if decision.rule == "margin":
            raise Ambiguous("the text fits several capabilities too equally to choose", **details)
        if request.capability is None:
            raise NoMatch("the text fits no registered capability well enough", **details)
        raise NoCapability("no registered agent offers the capability", **details)


def _numbered(earlier: list[Any], later: list[Any]) -> list[Any]:
    """Attempts of successive deliveries as one list, numbered on."""
    return [
        *earlier,
        *(dataclasses.replace(a, number=len(earlier) + n + 1) for n, a in enumerate(later)),
    ]


def _timeout_class(
    policy: RoutingPolicy, request: InvokeRequest, decision: RouteDecision, routing: RoutingService
) -> TimeoutClassPolicy:
    name = request.timeout_class
    if name is None:
        instance = routing.index.by_id.get(decision.agent_id or "")
        name = instance.spec.timeout_class if instance else "query"
    timeout_class = policy.timeout_classes.get(name)
    if timeout_class is None:
        raise ValidationFailed(
            f"unknown timeout class {name!r}: use one of {sorted(policy.timeout_classes)}",
            field="timeout_class",
        )
    return timeout_class


def _deadline_s(
    deadline_ms: int | None, policy: RoutingPolicy, timeout_class: TimeoutClassPolicy
) -> float:
    """The class's whole-request budget, shortened by the caller's own deadline."""
    budget = policy.deadline_s(timeout_class)
    return budget if deadline_ms is None else min(budget, deadline_ms / 1000)


def _wait_limit_s(deadline_ms: int | None, policy: RoutingPolicy) -> float:
    """How long a duplicate waits for the first: the caller's deadline, else the longest class."""
    longest = policy.longest_deadline_s
    return longest if deadline_ms is None else deadline_ms / 1000


def _hop_budget(from_header: int | None, from_body: int | None) -> int:
    """The smaller of the budget an agent passed on and the one the body asks for."""
    if from_header is None:
        return DEFAULT_MAX_HOP if from_body is None else from_body
    return from_header if from_body is None else min(from_header, from_body)


def _ended_answer(end: StreamEnd) -> Answer:
    """A stream's answer as the idempotency store and the journal keep it."""
    document = end.document or {}
    if end.error is None:
        return Answer.of(200, document)
    return Answer(end.error.status, orjson.dumps(document))


def _error_answer(exc: ReachError, request_id: str, trace: TraceContext) -> Answer:
    exc.details.setdefault("request_id", request_id)
    exc.details.setdefault("trace_id", trace.trace_id)
    return Answer.of_error(exc)
