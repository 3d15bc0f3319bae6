"""What a request gets when its delivery could not happen.

A request that no instance could take is parked (202 with a task id, replayed later by
the task board) when it may wait; otherwise, and after any other failure of a text
request, the closest earlier answer of a capability declared safe is served as
`degraded` (`invoke/similar_answers.py`); else the failure stands. When a parked
request's time runs out (`expire`): past its chain's deadline, 504
`delegation_expired`; else a remembered answer as `degraded` (a capability declared
safe only), else 503 saying what was true (`unreached.expired`).
"""

from __future__ import annotations

from typing import Any

import structlog

from agent_reach.clock import Clock
from agent_reach.errors import NoInstance, ReachError
from agent_reach.invoke.answer_memory import AnswerMemory
from agent_reach.invoke.finish import error_answer
from agent_reach.invoke.semantics import may_answer_from_memory
from agent_reach.invoke.similar_answers import SimilarAnswers
from agent_reach.invoke.tasks import TaskBoard, TaskEntry
from agent_reach.invoke.unreached import Disabled, expired, unreached_instances
from agent_reach.mesh.kill_switch import KillSwitch
from agent_reach.mesh.service import chain_expired
from agent_reach.model.decisions import RouteDecision
from agent_reach.observability.metrics import Metrics
from agent_reach.observability.spans import Span
from agent_reach.observability.tracecontext import TraceContext
from agent_reach.observability.tracing import Tracer
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex
from agent_reach.registry.monitor import HealthMonitor
from agent_reach.wire.answer import Answer

log = structlog.get_logger("agent_reach.invoke")


class Parking:
    """Parks unreached requests, serves remembered answers, and expires parked ones."""

    def __init__(
        self,
        *,
        index: RegistryIndex,
        tasks: TaskBoard,
        health: HealthMonitor,
        answers: AnswerMemory,
        similar: SimilarAnswers | None,
        switch: KillSwitch | None,
        clock: Clock,
        metrics: Metrics,
        tracer: Tracer,
    ) -> None:
        self.index = index
        self.tasks = tasks
        self.health = health
        self.answers = answers
        self.similar = similar
        self.switch = switch
        self.clock = clock
        self.metrics = metrics
        self.tracer = tracer

    async def after_failure(
        self,
        task: TaskEntry,
        decision: RouteDecision,
        error: ReachError,
        policy: Policy,
        span: Span,
        *,
        queued: bool,
    ) -> Answer:
        """The answer of a routed request whose delivery failed with `error`: parked when
        no instance could take it and it may wait, else a similar earlier answer, else
        `error` raised (with the decision as its `route`)."""
        request = task.request
        if (
            not isinstance(error, NoInstance)
            or queued
            or not request.suspend
            or policy.delivery.suspend_s <= 0
        ):
            error.details.setdefault("route", decision)  # as every other failure after routing
            similar = await self._similar(task, decision, error)
            if similar is None:
                raise error
            span.status = "degraded"
            return similar
        capability = decision.capability or request.capability or ""
        self.health.probe_soon(list(error.details.get("tried", [])))
        self.metrics.fallbacks.labels("suspended").inc()
        self.metrics.requests.labels(capability, "suspended").inc()
        log.info("request_suspended", request_id=task.task_id, capability=capability)
        span.status = "suspended"
        why = unreached_instances(
            self.index,
            capability,
            error.details.get("attempts") or [],
            self.clock.monotonic(),
            self._disabled(),
        )
        return await self.tasks.accept(
            task, "suspended", suspend_s=policy.delivery.suspend_s, why=why
        )

    async def _similar(
        self, task: TaskEntry, decision: RouteDecision, error: ReachError
    ) -> Answer | None:
        """A text request whose delivery failed: the closest earlier answer, `degraded`
        (of a capability declared safe only)."""
        if self.similar is None or not task.request.text or not decision.capability:
            return None
        if not may_answer_from_memory(self.index, decision.capability):
            return None
        return await self.similar.fallback(task, decision, error)

    async def expire(self, task: TaskEntry, last_failure: dict[str, Any] | None) -> Answer:
        """A parked task's time ran out: its answer (the module's rules)."""
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
                    self.index, capability or "", [], self.clock.monotonic(), self._disabled()
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

    def _disabled(self) -> Disabled:
        """The kill switch's records (who disabled which agent, when), as last read."""
        return self.switch.records if self.switch is not None else {}
