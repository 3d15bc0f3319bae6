"""The invoke service: one request from the edge to its answer.

hop check -> idempotency claim (caller-chosen ids only) -> route -> synchronous
attempts, or a task for asynchronous requests -> the answer, stored for replays.
Requests that no instance could take are suspended (202 with a task id) and
replayed later; when their time runs out, a remembered answer is served as
`degraded`, else the failure. The stages beside it: `checks` (between routing and
delivery), `dispatch` (the attempts and 421 redirects), `finish` (what an answer
leaves behind).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from agent_reach.clock import Clock
from agent_reach.context.service import ContextService
from agent_reach.errors import Forbidden, HopLimit, NoInstance, ReachError
from agent_reach.ids import new_request_id
from agent_reach.invoke import checks
from agent_reach.invoke.admission import Admission, Limit
from agent_reach.invoke.answer import Answer
from agent_reach.invoke.answer_memory import AnswerMemory
from agent_reach.invoke.attempts import AttemptLoop
from agent_reach.invoke.budget import RetryBudget
from agent_reach.invoke.deadletters import DeadLetters
from agent_reach.invoke.delivery import Delivery
from agent_reach.invoke.dispatch import Dispatcher
from agent_reach.invoke.finish import UNROUTED, Finisher, ended_answer, error_answer
from agent_reach.invoke.idempotency import IdempotencyGuard, Owned, fingerprint
from agent_reach.invoke.plan import DeliveryPlan
from agent_reach.invoke.schemas import PayloadSchemas
from agent_reach.invoke.semantics import may_answer_from_memory
from agent_reach.invoke.similar_answers import SimilarAnswers
from agent_reach.invoke.streaming import EventStream, StreamEnd
from agent_reach.invoke.tasks import TaskBoard, TaskEntry
from agent_reach.invoke.unreached import Disabled, expired, unreached_instances
from agent_reach.mesh.service import Mesh, chain_expired, delegated_limits
from agent_reach.mesh.tokens import delegation_record
from agent_reach.model.decisions import RouteDecision
from agent_reach.model.invocations import InvokeRequest
from agent_reach.model.keys import ANONYMOUS, Principal
from agent_reach.observability.metrics import Metrics
from agent_reach.observability.spans import Span
from agent_reach.observability.timeseries import Outcome
from agent_reach.observability.tracecontext import TraceContext
from agent_reach.observability.tracing import Tracer
from agent_reach.policy.policy import Policy
from agent_reach.registry.monitor import HealthMonitor
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
        self.dispatch = Dispatcher(attempts, routing, security, contexts, metrics, learning)
        self.finish = Finisher(
            routing=routing,
            guard=guard,
            answers=answers,
            similar=similar,
            clock=clock,
            metrics=metrics,
            tracer=tracer,
            journal=journal,
        )

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
            answer = error_answer(exc, request_id, trace)
        capability = self.finish.label(request.capability) if request.capability else UNROUTED
        shed: Outcome = "refused" if answer.status >= 400 else "ok"  # ok: remembered, degraded
        self.metrics.recent.request(self.clock.wall(), capability, None, shed)
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
            "invoke",
            trace,
            request.capability or "",
            request_id,
            principal=principal.name,
            chain=principal.chain,
        )
        trace = trace.under(span.span_id)  # route and attempts are children of the invoke span
        hops = checks.hop_budget(hop_budget, request.max_hop)
        if principal.chain is not None:  # a delegated call: within what its token left
            hops, deadline_ms = delegated_limits(
                principal.chain, hops, deadline_ms, self.clock.wall()
            )
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
                if principal.chain is not None:
                    Mesh.check_context(principal, request.context_id)
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
                    deadline=started + checks.wait_limit_s(deadline_ms, policy),
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
        policy = self.routing.policy()
        owned: Owned | None = None
        try:
            task = self._within_chain(task)
            # Claimed under its own key (the request id's record holds the 202): a task
            # taken over from a dead coordinator is re-sent only to an idempotent instance.
            claimed = await self.guard.claim_key(
                f"task-run:{task.key}",
                fingerprint(task.request),
                lease_s=policy.longest_deadline_s,
                deadline=self.clock.monotonic() + policy.longest_deadline_s,
                wait=True,
            )
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

    def _within_chain(self, task: TaskEntry) -> TaskEntry:
        """The task with the hops and deadline its chain has left now (a parked request
        waited); `DelegationExpired` once nothing is left."""
        chain = task.principal.chain
        if chain is None:
            return task
        now = self.clock.wall()
        if now >= chain.expires_at:
            raise chain_expired(chain.expires_at)
        hops, deadline_ms = delegated_limits(chain, task.hop_budget, task.deadline_ms, now)
        return dataclasses.replace(task, hop_budget=hops, deadline_ms=deadline_ms)

    async def expire_task(self, task: TaskEntry, last_failure: dict[str, Any] | None) -> Answer:
        """A suspended task's time ran out: past its chain's deadline, 504
        `delegation_expired`; else a remembered answer as `degraded` (a capability
        declared safe only), else 503 saying what was true (`unreached.expired`)."""
        capability = task.request.capability
        chain = task.principal.chain
        remembered: Any = None
        error: ReachError | None = None
        if chain is not None and self.clock.wall() >= chain.expires_at:
            error = chain_expired(chain.expires_at)  # its caller waits no longer
        else:
            if capability:
                remembered = await self.answers.recall(capability, task.request.payload)
            if remembered is None:
                instances = unreached_instances(
                    self.routing.index,
                    capability or "",
                    [],
                    self.clock.monotonic(),
                    self._disabled(),
                )
                error = expired(capability or "(text)", instances, last_failure)
        self.tracer.end(
            self.tracer.start(
                "task",
                TraceContext(task.trace_id),
                capability or "",
                task.task_id,
                principal=task.principal.name,
            ),
            "degraded" if error is None else error.code,
        )
        if error is not None:
            self.metrics.requests.labels(capability or "", "error").inc()
            return error_answer(error, task.task_id, TraceContext(task.trace_id))
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
        policy: Policy,
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
        if task.principal.chain is not None:  # its decisions say on whose behalf, through whom
            self.routing.decision_log.note_delegation(
                task.task_id, delegation_record(task.principal.chain)
            )
        if request.capability:  # named: nothing to wait for, unless unknown here
            if self.routing.catch_up is not None:
                await self.routing.caught_up(request.capability)
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
            checks.check_routable(decision, request, task.task_id, self.routing.index)
            checks.check_payload(self.schemas, self.routing.index, decision, request)
            if decision.capability is not None:
                if queued or request.capability is None:
                    self.security.authorize_invoke(task.principal, decision.capability)
                await self.security.admit(task.principal, decision.capability)
            timeout_class = checks.timeout_class_of(policy, request, decision, self.routing.index)
            if not queued and (request.mode == "async" or timeout_class.asynchronous):
                span.status = "queued"
                return await self.tasks.accept(task, "queued"), None
            delivery = Delivery(
                request_id=task.task_id,
                capability=decision.capability or "",
                payload=request.payload,
                trace_id=trace.trace_id,
                hop=task.hop_budget - 1,
                text=request.text,  # the caller's words, whether or not they chose the route
                params=self.dispatch.params(decision, request),
                stream=stream,
            )
            plan = DeliveryPlan(
                decision,
                delivery,
                trace,
                timeout_class,
                started + checks.deadline_s(task.deadline_ms, policy, timeout_class),
                policy.delivery,
                owned,
            )
            delivered = await self.dispatch.deliver(task, plan)
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
            why = unreached_instances(
                self.routing.index,
                capability,
                exc.attempts,
                self.clock.monotonic(),
                self._disabled(),
            )
            answer = await self.tasks.accept(
                task, "suspended", suspend_s=policy.delivery.suspend_s, why=why
            )
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
            return self.finish.streamed(task, trace, decision, delivered, policy, span), None
        return self.finish.succeeded(task, trace, decision, delivered, policy, span), None

    def _disabled(self) -> Disabled:
        """The kill switch's records (who disabled which agent, when), as last read."""
        mesh = self.dispatch.mesh
        return mesh.switch.records if mesh is not None else {}

    async def _similar_answer(
        self, task: TaskEntry, decision: RouteDecision, error: ReachError
    ) -> Answer | None:
        """A text request whose delivery failed: the closest earlier answer, `degraded`
        (of a capability declared safe only)."""
        if self.similar is None or not task.request.text or not decision.capability:
            return None
        if not may_answer_from_memory(self.routing.index, decision.capability):
            return None
        return await self.similar.fallback(task, decision, error)
