"""The attempt loop: deliver within one deadline, moving along the fallback chain.

Order: the chosen instance, the next-best instances of the same capability, then
live generic (catch-all) agents. What happens after a failed attempt depends on
what the failure says about the agent:

- never reached it (connect refused) or a definite retryable failure (5xx, 429):
  move on to the next instance at once — in every timeout class;
- no answer in time, or the connection died after sending (the agent may still be
  acting): a re-send, bounded by the class's `retries`, after a jittered backoff,
  to another instance when there is one;
- a failure the agent made final (4xx, `X-Reach-Retryable: false`, an answer that
  cannot be read or is over the limit: it acted and answered): stop — except a 421
  "not mine" to a request that named its capability: the agent did nothing, so the
  next instance is tried at once (no retry-budget slot), and only when none is left is
  that 421 the answer (a text request's 421 is re-routed instead: invoke/dispatch.py).

Once any attempt may have reached an agent — it may still be acting, or it
answered a 5xx other than 503 (it may have acted before failing) — running out
of instances is that failure, never "no instance": the request is not parked
and replayed behind the caller's back. A connect timeout is not counted against
the instance's health the way a refusal is: under load a full listen backlog
drops SYNs of a working agent.

Every attempt after one that reached an agent needs a slot in the retry budget.

Each attempt's outcome goes to the quality ledger (mesh/quality.py): completed, failed,
timed out, or bounced (that 421). Never reaching an agent, a 429 and a hop limit down
the line are health's and load's business, not the quality of its work.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_reach.clock import Clock
from agent_reach.errors import (
    AgentFailed,
    AgentTimeout,
    AgentUnreachable,
    HopLimit,
    NoInstance,
    OutcomeUnknown,
)
from agent_reach.invoke.budget import RetryBudget, backoff_pause
from agent_reach.invoke.plan import DeliveryPlan
from agent_reach.invoke.semantics import may_resend
from agent_reach.invoke.transports import Transports
from agent_reach.model.decisions import RouteDecision
from agent_reach.model.delivery import Delivery
from agent_reach.model.invocations import Attempt
from agent_reach.observability.metrics import Metrics
from agent_reach.observability.timeseries import Outcome
from agent_reach.observability.tracecontext import TraceContext
from agent_reach.observability.tracing import Tracer
from agent_reach.registry.index import Instance, RegistryIndex
from agent_reach.registry.monitor import HealthMonitor
from agent_reach.wire.event_stream import CALLER_GONE, EventStream, StreamEnd
from agent_reach.wire.http_body import Normalization, Shaped

if TYPE_CHECKING:
    from agent_reach.mesh.quality import QualityLedger
    from agent_reach.model.quality import OutcomeKind

DECLINED_STATUSES = frozenset({421, 429})  # "not mine" and "too busy": the agent said no
NOT_TAKEN = 503  # RFC 9110 §15.6.4: "currently unable to handle the request"
NOT_MINE = 421


@dataclass(slots=True)
class Delivered:
    """A successful delivery: the result, who gave it, and every attempt on the way."""

    result: Any
    instance: Instance
    attempts: list[Attempt]
    normalized: Normalization = "json"


@dataclass(slots=True)
class _Chain:
    """The instances still to try, in fallback order, and what has happened so far."""

    order: list[str]
    generic: list[str]
    tried: list[str] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    resends: int = 0
    reached_agent: bool = False
    unknown: AgentFailed | None = None  # the first failure after which the agent may have acted
    answered: AgentFailed | None = None  # the first 5xx answer: that agent may have acted too
    bounced: AgentFailed | None = None  # the first 421 to a request that named its capability


class AttemptLoop:
    """Runs the attempts of one request; stateless between requests."""

    def __init__(
        self,
        index: RegistryIndex,
        transports: Transports,
        health: HealthMonitor,
        budget: RetryBudget,
        clock: Clock,
        metrics: Metrics,
        tracer: Tracer,
        quality: QualityLedger | None = None,
    ) -> None:
        self.index = index
        self.transports = transports
        self.health = health
        self.budget = budget
        self.clock = clock
        self.metrics = metrics
        self.tracer = tracer
        self.quality = quality  # observes each attempt's outcome (mesh/quality.py)

    async def run(self, plan: DeliveryPlan) -> Delivered:
        """Deliver to the first instance that succeeds; raise the failure that ended it.

        `NoInstance` (with the attempts) when every instance failed definitely — nothing
        is known to have acted, so the caller may suspend the request; `AgentTimeout`
        when re-sends ran out; the agent's own error when it made the failure final.
        """
        decision, owned = plan.decision, plan.owned
        chain = _Chain(
            order=_same_capability(decision, owned.sent_to if owned is not None else ()),
            generic=[] if decision.rule == "generic" else self._generic_ids(),
        )
        if owned is not None and owned.inherited:
            self._idempotent_only(chain, owned.inherited, plan.delivery.capability)
        deadline, policy, retries = plan.deadline, plan.policy, plan.timeout_class.retries
        last_error: AgentFailed | None = None
        while True:
            left_s = deadline - self.clock.monotonic()
            if left_s <= 0:
                raise _deadline_passed(last_error, chain)
            instance = self._next(chain, last_error)
            if instance is None:
                raise _exhausted(last_error, chain)
            holds_slot = last_error is not None and chain.reached_agent
            if holds_slot and not self.budget.try_retry(policy):
                self.metrics.retry_budget_exhausted.inc()
                raise _with_attempts(last_error, chain)
            if last_error is not None:
                kind = "resend" if instance.id in chain.tried else "next_instance"
                self.metrics.retries.labels(kind).inc()
            try:
                return await self._attempt(instance, plan, chain, left_s)
            except AgentFailed as exc:
                last_error = exc
            finally:
                if holds_slot:
                    self.budget.end_retry()
            if _bounced(last_error, decision):
                chain.bounced = chain.bounced or last_error
                continue  # it did nothing: its siblings may take it
            if not last_error.retryable:
                raise _with_attempts(last_error, chain)
            if not isinstance(last_error, AgentUnreachable):
                chain.reached_agent = True
                if chain.answered is None and _answered_5xx(last_error):
                    chain.answered = last_error
            if _may_have_acted(last_error):
                chain.unknown = chain.unknown or last_error
                chain.resends += 1
                if chain.resends > retries:
                    raise _with_attempts(last_error, chain)
                left_s = deadline - self.clock.monotonic()
                await asyncio.sleep(backoff_pause(policy, chain.resends, left_s))

    def _idempotent_only(self, chain: _Chain, reached: Sequence[str], capability: str) -> None:
        """An earlier delivery may have acted (its owner died, or gave the id back with an
        unknown outcome): re-sent only where its declarations allow (`may_resend`: any
        instance of a `safe` capability, one it reached that declared `idempotent`),
        else not at all (`outcome_unknown`)."""

        def guarded(agent_id: str) -> bool:
            instance = self.index.by_id.get(agent_id)
            return instance is not None and may_resend(instance, capability, reached)

        chain.order = [i for i in chain.order if guarded(i)]
        chain.generic = [i for i in chain.generic if guarded(i)]
        if not chain.order and not chain.generic:
            raise OutcomeUnknown(
                "an earlier delivery of this request id may have acted and no instance "
                "it reached declared it idempotent (nor is it declared safe): it is not "
                "sent again",
                outcome_unknown=True,
                sent_to=list(reached),
            )

    def _next(self, chain: _Chain, last_error: AgentFailed | None) -> Instance | None:
        """The next live untried instance; the same one again only for a re-send with no other."""
        now = self.clock.monotonic()
        for stage, ids in (("next_instance", chain.order), ("generic", chain.generic)):
            for agent_id in ids:
                instance = self.index.by_id.get(agent_id)
                if agent_id in chain.tried or instance is None or not instance.is_live(now):
                    continue
                if chain.tried:
                    self.metrics.fallbacks.labels(stage).inc()
                return instance
        if last_error is not None and _may_have_acted(last_error) and chain.tried:
            instance = self.index.by_id.get(chain.tried[-1])
            if instance is not None and instance.is_live(now):
                return instance
        return None

    async def _attempt(
        self, instance: Instance, plan: DeliveryPlan, chain: _Chain, left_s: float
    ) -> Delivered:
        # `instance.id` is `spec.id`, read without the pydantic model's attribute hook
        spec, delivery, trace, agent_id = instance.spec, plan.delivery, plan.trace, instance.id
        if plan.delegation_of is not None:
            delivery = dataclasses.replace(delivery, delegation=await plan.delegation_of(instance))
        if plan.context_of is not None:
            delivery = dataclasses.replace(delivery, context=await plan.context_of(instance))
        if plan.owned is not None:
            await plan.owned.note_sent(agent_id)
        transport_spec = spec.transport
        transport = self.transports.get(transport_spec.type)
        span_id, traceparent = trace.child_traceparent()
        window = instance.stats
        number = len(chain.attempts) + 1
        via = _via(agent_id, chain)
        if agent_id not in chain.tried:
            chain.tried.append(agent_id)
        window.in_flight += 1
        started = self.clock.monotonic()
        try:
            result = await transport.deliver(
                transport_spec,
                delivery,
                traceparent=traceparent,
                timeout_s=min(plan.timeout_class.timeout_s, left_s),
            )
        except (AgentFailed, HopLimit) as exc:
            # HopLimit: the agent's own onward call ran out of hops; it is final, as it is.
            elapsed_ms = (self.clock.monotonic() - started) * 1000
            window.record(ok=False, latency_ms=elapsed_ms)
            if exc.retryable and not exc.connect_timeout:
                self.health.record_delivery(instance, ok=False, error=f"{exc.code}: {exc.message}")
            self.metrics.attempt_seconds.labels(exc.code).observe(elapsed_ms / 1000)
            declined = exc.http_status in DECLINED_STATUSES
            self._chart(agent_id, elapsed_ms, "refused" if declined else "error")
            self._trace(trace, span_id, delivery, agent_id, number, started, exc.code, via)
            chain.attempts.append(
                Attempt(
                    agent_id,
                    number,
                    exc.code,
                    round(elapsed_ms, 3),
                    exc.http_status,
                    exc.message,
                )
            )
            if isinstance(exc, HopLimit):
                exc.attempts = chain.attempts
            self._note_outcome(agent_id, _outcome_of(exc, plan.decision))
            raise
        finally:
            window.in_flight -= 1
        if isinstance(result, EventStream):
            return self._streaming(result, instance, trace, span_id, delivery, chain, started, via)
        elapsed_ms = (self.clock.monotonic() - started) * 1000
        window.record(ok=True, latency_ms=elapsed_ms)
        self.health.record_delivery(instance, ok=True)
        if self.quality is not None:  # _note_outcome and _chart, inline on the way of most
            self.quality.record(agent_id, "completed")
        metrics = self.metrics
        metrics.child(metrics.attempt_seconds, "ok").observe(elapsed_ms / 1000)
        metrics.recent.attempt(self.clock.wall(), agent_id, elapsed_ms / 1000, "ok")
        cost = result.cost if isinstance(result, Shaped) else None
        self._trace(trace, span_id, delivery, agent_id, number, started, "ok", via, cost)
        chain.attempts.append(Attempt(agent_id, number, "ok", round(elapsed_ms, 3), cost=cost))
        if cost is not None and plan.reported_cost is not None:
            await plan.reported_cost(instance, cost)
        if isinstance(result, Shaped):
            return Delivered(result.value, instance, chain.attempts, result.normalized)
        return Delivered(result, instance, chain.attempts)

    def _streaming(
        self,
        stream: EventStream,
        instance: Instance,
        trace: TraceContext,
        span_id: str,
        delivery: Delivery,
        chain: _Chain,
        started: float,
        via: str | None,
    ) -> Delivered:
        """A stream has begun: the attempt is recorded when it ends, as it ended (a stream
        is never re-sent, whatever its end)."""
        window = instance.stats
        window.in_flight += 1
        number = len(chain.attempts) + 1
        attempts = chain.attempts

        async def record(end: StreamEnd) -> None:
            window.in_flight -= 1
            elapsed_ms = (self.clock.monotonic() - started) * 1000
            ok = end.error is None
            if end.outcome != CALLER_GONE:  # the caller leaving says nothing of the agent
                window.record(ok=ok, latency_ms=elapsed_ms)
                self.health.record_delivery(instance, ok=ok)
                self._chart(instance.id, elapsed_ms, "ok" if ok else "error")
                self._note_outcome(instance.id, "completed" if end.error is None else "failed")
            self.metrics.child(self.metrics.attempt_seconds, end.outcome).observe(elapsed_ms / 1000)
            self._trace(trace, span_id, delivery, instance.id, number, started, end.outcome, via)
            message = end.error.message if end.error is not None else None
            attempts.append(
                Attempt(instance.id, number, end.outcome, round(elapsed_ms, 3), None, message)
            )

        stream.on_end(record)
        return Delivered(stream, instance, attempts, "sse")

    def _note_outcome(self, agent_id: str, kind: OutcomeKind | None) -> None:
        """The attempt in the outcome ledger (nothing for what says nothing of its work)."""
        if kind is not None and self.quality is not None:
            self.quality.record(agent_id, kind)

    def _chart(self, agent_id: str, elapsed_ms: float, outcome: Outcome) -> None:
        """The attempt in the dashboard's per-instance time series."""
        self.metrics.recent.attempt(self.clock.wall(), agent_id, elapsed_ms / 1000, outcome)

    def _trace(
        self,
        trace: TraceContext,
        span_id: str,
        delivery: Delivery,
        agent_id: str,
        number: int,
        started: float,
        status: str,
        via: str | None,
        cost: float | None = None,
    ) -> None:
        self.tracer.record(
            "attempt",
            delivery.capability,
            trace_id=trace.trace_id,
            parent_id=trace.parent_span_id,
            started=started,
            status=status,
            span_id=span_id,
            agent_id=agent_id,
            attempt=number,
            note=via,
            cost=cost,
        )

    def _generic_ids(self) -> list[str]:
        return [i.id for i in self.index.generic]


def _same_capability(decision: RouteDecision, reached: Sequence[str]) -> list[str]:
    """The decision's instances, best first, after those the request may have `reached`;
    never one whose offer does not stand (it declined, or was not asked: negotiation)."""
    chosen = decision.agent_id
    rest = [
        c.agent_id
        for c in decision.candidates
        if c.capability == decision.capability
        and c.agent_id != chosen
        and (c.offer is None or c.offer.stands)
    ]
    order = [chosen, *rest] if chosen else rest
    if not reached:
        return order
    return [i for i in order if i in reached] + [i for i in order if i not in reached]


def _via(agent_id: str, chain: _Chain) -> str | None:
    """How an attempt after the first was chosen: the same instance again, or the chain."""
    if not chain.tried:
        return None
    if agent_id in chain.tried:
        return "resend"
    return "next_instance" if agent_id in chain.order else "generic"


def _bounced(error: AgentFailed, decision: RouteDecision) -> bool:
    """A 421 "not mine" to a request that named its capability (an instance of it said no)."""
    return decision.rule == "exact" and error.http_status == NOT_MINE


def _outcome_of(error: AgentFailed | HopLimit, decision: RouteDecision) -> OutcomeKind | None:
    """What a failed attempt says of the instance's work, if anything."""
    if isinstance(error, HopLimit | AgentUnreachable) or error.connect_timeout:
        return None
    status = error.http_status
    if status == NOT_MINE:
        return "bounced" if decision.rule == "exact" else None  # text: the route missed
    if status == 429:
        return None
    return "timed_out" if isinstance(error, AgentTimeout) else "failed"


def _may_have_acted(error: AgentFailed) -> bool:
    said = error.outcome_unknown
    return isinstance(error, AgentTimeout) if said is None else said


def _with_attempts(error: AgentFailed | None, chain: _Chain) -> AgentFailed:
    assert error is not None  # only called after a failed attempt
    error.attempts = chain.attempts
    return error


def _answered_5xx(error: AgentFailed) -> bool:
    """A 5xx answer other than 503: the agent took the request and failed on the way, so
    it may have acted. 503 (like 429) says it did not take it: that request may wait."""
    status = error.http_status or 0
    return status >= 500 and status != NOT_TAKEN


def _exhausted(last_error: AgentFailed | None, chain: _Chain) -> Exception:
    acted = chain.unknown or chain.answered
    if acted is not None:
        return _with_attempts(acted, chain)
    if chain.bounced is not None:  # every instance that was tried said "not mine"
        return _with_attempts(chain.bounced, chain)
    return NoInstance(
        "no instance of the capability could take the request"
        + (f" (last failure: {last_error.code})" if last_error else ""),
        attempts=chain.attempts,
        tried=chain.tried,
    )


def _deadline_passed(last_error: AgentFailed | None, chain: _Chain) -> AgentTimeout:
    return AgentTimeout(
        "the request's deadline passed before an agent answered",
        code="deadline_exceeded",
        outcome_unknown=chain.reached_agent,
        attempts=chain.attempts,
        last_failure=last_error.code if last_error else None,
    )
