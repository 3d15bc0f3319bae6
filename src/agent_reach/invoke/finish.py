"""What a request leaves behind once it has its answer.

A delivered answer teaches the router (factor weights, context affinity), is
remembered for the degraded fallback (an answer of a capability its instance declared
`safe` only), and becomes the caller's answer; then every
request, answered or failed, releases its idempotency claim and is recorded: its
latency, its invoke span and its journal entry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from agent_reach.clock import Clock
from agent_reach.errors import ReachError
from agent_reach.invoke.answer_memory import AnswerMemory
from agent_reach.invoke.attempts import Delivered
from agent_reach.invoke.idempotency import IdempotencyGuard, Owned, is_final, may_have_acted
from agent_reach.invoke.similar_answers import SimilarAnswers
from agent_reach.invoke.tasks import TaskEntry
from agent_reach.model.decisions import RouteDecision
from agent_reach.model.invocations import InvokeRequest, InvokeResult, Status
from agent_reach.model.keys import Principal
from agent_reach.observability.metrics import Metrics
from agent_reach.observability.spans import Span
from agent_reach.observability.timeseries import Outcome
from agent_reach.observability.tracecontext import TraceContext
from agent_reach.observability.tracing import Tracer
from agent_reach.policy.policy import Policy
from agent_reach.routing.service import RoutingService
from agent_reach.troubleshooting.journal import RequestJournal
from agent_reach.wire.answer import Answer
from agent_reach.wire.event_stream import EventStream, StreamEnd

if TYPE_CHECKING:
    from agent_reach.mesh.quality import QualityLedger

# Answers given instead of a delivery: the router would not guess, a caller may not, or a
# limit said no. The dashboard charts them apart from failures.
REFUSALS = frozenset(
    {"no_match", "ambiguous", "no_capability", "forbidden", "quota_exceeded", "overloaded"}
)
UNROUTED = "(unrouted)"  # the dashboard's name for requests that reached no capability


class Finisher:
    """Turns a delivery into the caller's answer and records how each request ended."""

    def __init__(
        self,
        *,
        routing: RoutingService,
        guard: IdempotencyGuard,
        answers: AnswerMemory,
        similar: SimilarAnswers | None,
        clock: Clock,
        metrics: Metrics,
        tracer: Tracer,
        journal: RequestJournal | None,
        quality: QualityLedger | None = None,
    ) -> None:
        self.routing = routing
        self.guard = guard
        self.answers = answers
        self.similar = similar
        self.clock = clock
        self.metrics = metrics
        self.tracer = tracer
        self.journal = journal
        self.quality = quality  # notes who served each answer, so that its caller may rate it

    def label(self, capability: str | None) -> str:
        """A metric label: registered capabilities by name, anything else as one value
        (callers' typos must not grow the metrics without bound)."""
        return capability if capability in self.routing.index.by_capability else "(unknown)"

    def succeeded(
        self,
        task: TaskEntry,
        trace: TraceContext,
        decision: RouteDecision,
        delivered: Delivered,
        policy: Policy,
        span: Span,
    ) -> Answer:
        """A delivered answer: what the router learns of it, and the caller's answer."""
        request = task.request
        if policy.adaptation.enabled:  # each attempt's outcome teaches the factor weights
            self._learn_weights(decision, delivered, policy)
        status: Status = "ok" if delivered.instance.id == decision.agent_id else "fallback"
        if request.context_id:
            self.routing.affinity.record(
                request.context_id, delivered.instance.id, self.clock.monotonic()
            )
        if decision.capability is not None:
            self._remember(task, decision.capability, delivered, policy)
        self.metrics.child(self.metrics.requests, decision.capability or "", status).inc()
        if self.quality is not None:  # so that its caller may rate it
            self.quality.served(task.task_id, delivered.instance.id, task.principal)
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
        return Answer(200, orjson.dumps(result))  # Answer.of, without its frame

    def streamed(
        self,
        task: TaskEntry,
        trace: TraceContext,
        decision: RouteDecision,
        delivered: Delivered,
        policy: Policy,
        span: Span,
    ) -> Answer:
        """An answer being streamed: once it ends, its assembled events are the result
        (learnt, remembered, stored for replays) and the last event carries the answer."""
        stream: EventStream = delivered.result

        async def ended(end: StreamEnd) -> None:
            if end.error is None:
                delivered.result = end.result
                answer = self.succeeded(task, trace, decision, delivered, policy, span)
                end.document = orjson.loads(answer.body)
                return
            error = end.error
            error.details.setdefault("route", decision)
            error.attempts = delivered.attempts
            self.metrics.requests.labels(self.label(decision.capability), "error").inc()
            span.status, span.agent_id = "error", delivered.instance.id
            error.details.setdefault("request_id", task.task_id)
            error.details.setdefault("trace_id", trace.trace_id)
            end.document = error.to_body()

        stream.on_end(ended)
        return Answer(200, b"", stream=stream)

    async def ended(
        self,
        answer: Answer,
        error: ReachError | None,
        task: TaskEntry,
        span: Span,
        policy: Policy,
        owned: Owned | None,
        started: float,
    ) -> None:
        """A request has its answer: its claim released, then it is recorded."""
        if owned is not None:
            await self.release(answer, error, task, policy, owned)
        self.recorded(answer, error, task, span, started)

    async def release(
        self,
        answer: Answer,
        error: ReachError | None,
        task: TaskEntry,
        policy: Policy,
        owned: Owned,
    ) -> None:
        """The caller's request id is done: its answer is kept for replays (or given up)."""
        await self.guard.finish(
            owned.key,
            owned.fence,
            answer,
            keep=is_final(error) or answer.status == 202,
            ttl_s=policy.delivery.idempotency_ttl_s,
            forget=not owned.inherited and not may_have_acted(error),
        )

    def recorded(
        self, answer: Answer, error: ReachError | None, task: TaskEntry, span: Span, started: float
    ) -> None:
        """The request's latency (and its point on the dashboard's charts), its invoke span
        and its journal entry."""
        latency_s = self.clock.monotonic() - started
        label = self.label(span.name)
        self.metrics.request_seconds_of(label).observe(latency_s)
        self._chart(error, label if span.name else UNROUTED, latency_s)
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

    def shed(
        self,
        request: InvokeRequest,
        request_id: str,
        principal: Principal,
        trace: TraceContext,
        answer: Answer,
        started: float,
    ) -> None:
        """A request admission refused (`invoke/admission.py`), on the dashboard's charts
        and in the journal."""
        capability = self.label(request.capability) if request.capability else UNROUTED
        shed: Outcome = "refused" if answer.status >= 400 else "ok"  # ok: remembered, degraded
        self.metrics.recent.request(self.clock.wall(), capability, None, shed)
        if self.journal is not None:
            self.journal.record(
                request_id, principal, trace.trace_id, request.context_id, answer, started
            )

    def _chart(self, error: ReachError | None, capability: str, latency_s: float) -> None:
        """The request in the dashboard's time series (a refusal's latency is not counted)."""
        if error is None:
            self.metrics.recent.request(self.clock.wall(), capability, latency_s, "ok")
        elif error.code in REFUSALS:
            self.metrics.recent.request(self.clock.wall(), capability, None, "refused")
        else:
            self.metrics.recent.request(self.clock.wall(), capability, latency_s, "error")

    def _remember(
        self, task: TaskEntry, capability: str, delivered: Delivered, policy: Policy
    ) -> None:
        """Keep the answer for the degraded fallback, if its instance declared the
        capability safe: an answer with side effects is never served from memory."""
        if not delivered.instance.spec.is_safe(capability):
            return
        request = task.request
        if policy.delivery.degraded_answers:
            self.answers.remember(
                capability, request.payload, delivered.result, policy.delivery.answer_ttl_s
            )
        if self.similar is not None and request.text:
            self.similar.remember(capability, request.text, task.task_id, delivered.result)

    def _learn_weights(self, decision: RouteDecision, delivered: Delivered, policy: Policy) -> None:
        """Each attempt's outcome teaches the factor weights (called when they adapt)."""
        for attempt in delivered.attempts:
            self.routing.adaptation.record(
                decision, attempt.agent_id, ok=attempt.outcome == "ok", policy=policy
            )


def ended_answer(end: StreamEnd) -> Answer:
    """A stream's answer as the idempotency store and the journal keep it."""
    document = end.document or {}
    if end.error is None:
        return Answer.of(200, document)
    return Answer(end.error.status, orjson.dumps(document))


def error_answer(exc: ReachError, request_id: str, trace: TraceContext) -> Answer:
    """The error's answer, naming the request and its trace."""
    exc.details.setdefault("request_id", request_id)
    exc.details.setdefault("trace_id", trace.trace_id)
    return Answer.of_error(exc)
