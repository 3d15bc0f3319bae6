"""One step through the invoke path: its capability, then its fallbacks, then parking.

Each capability tried is one `InvokeService.handle` call with its own request id
(`<run_id>:<step_id>` for the step's own, `...:fallback` and `...:workflow-fallback`
for the fallbacks), so a step that is run again (a resumed or taken-over run, a
repeated workflow request) replays the stored answer instead of executing twice.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import orjson

from agent_reach.clock import Clock
from agent_reach.invoke.service import InvokeService
from agent_reach.invoke.tasks import TaskBoard
from agent_reach.model.invocations import InvokeRequest
from agent_reach.model.workflows import RunRecord, StepSpec, StepState
from agent_reach.observability.metrics import Metrics
from agent_reach.observability.tracecontext import TraceContext
from agent_reach.observability.tracing import Tracer
from agent_reach.wire.answer import Answer

TEXT = "text"  # the label of a step's own candidate when it is routed by its text
NO_INSTANCE = "no_instance"  # the outcome that parks a step instead of failing it
TASK_POLL_FIRST_S = 0.01  # a step served as a task (a `long` class) is polled from 10 ms ...
TASK_POLL_MAX_S = 0.5  # ... backing off to half a second
DEADLINE_PASSED = "the run's deadline passed"


@dataclass(frozen=True, slots=True)
class Candidate:
    """One capability (or text) a step may be served by, and the request id it uses."""

    label: str  # the capability, or "text" for a step routed by its text
    capability: str | None
    text: str | None
    request_suffix: str
    is_fallback: bool


def candidates(step: StepSpec, workflow_fallback: str | None) -> list[Candidate]:
    """The step's own capability, its fallback, the workflow's fallback (each once)."""
    own = Candidate(step.action or TEXT, step.action, step.text, "", False)
    chain = [own]
    for capability, suffix in ((step.fallback, ":fallback"), (workflow_fallback, ":wf-fallback")):
        if capability is not None and all(c.capability != capability for c in chain):
            chain.append(Candidate(capability, capability, None, suffix, True))
    return chain


class StepRunner:
    """Serves one step of a run, filling in its `StepState`."""

    def __init__(
        self,
        invoke: InvokeService,
        tasks: TaskBoard,
        clock: Clock,
        tracer: Tracer,
        metrics: Metrics,
    ) -> None:
        self.invoke = invoke
        self.tasks = tasks
        self.clock = clock
        self.tracer = tracer
        self.metrics = metrics

    async def serve(
        self,
        record: RunRecord,
        step: StepSpec,
        state: StepState,
        payload: Any,
        text: str | None,
        workflow_fallback: str | None,
    ) -> None:
        """Try the step's candidates in order until one serves it; park or fail it otherwise.

        A candidate already tried with an outcome other than `no_instance` is not tried
        again: only a missing instance is worth another go when a parked run resumes.
        """
        trace = TraceContext(record.trace_id, record.span_id)
        span = self.tracer.start(
            "step", trace, state.id, f"{record.run_id}:{state.id}", principal=record.principal.name
        )
        last_error: dict[str, Any] | None = None
        for candidate in candidates(step, workflow_fallback):
            earlier = state.tried.get(candidate.label)
            if earlier is not None and earlier != NO_INSTANCE:
                continue
            status, body = await self._invoke(
                record, step, candidate, payload, text, trace.under(span.span_id)
            )
            error = body.get("error") if status >= 400 else None
            if isinstance(body.get("attempts"), list):
                state.attempts += len(body["attempts"])
            if error is None:
                state.tried[candidate.label] = "ok"
                state.status = "fallback" if candidate.is_fallback else "ok"
                state.fallback_used = candidate.capability if candidate.is_fallback else None
                route = body.get("route") or {}
                state.capability = route.get("capability") or candidate.capability
                state.agent_id = body.get("agent_id")
                state.result = body.get("result")
                state.reason = state.error = None
                break
            last_error = {"code": error.get("code"), "message": error.get("message")}
            state.tried[candidate.label] = str(error.get("code"))
        else:
            state.error = last_error
            waiting = [c for c, outcome in state.tried.items() if outcome == NO_INSTANCE]
            if waiting and not step.optional:
                state.status = "parked"
                state.reason = f"no live instance of {', '.join(waiting)}"
            else:
                state.status = "failed"
                state.reason = "every capability tried failed" if len(state.tried) > 1 else None
        state.ended_ms = (self.clock.wall() - record.created_at) * 1000
        self.metrics.child(self.metrics.workflow_steps, state.status).inc()
        span.agent_id = state.agent_id
        served = state.status in ("ok", "fallback", "parked")
        self.tracer.end(
            span, state.status if served else (state.error or {}).get("code") or "failed"
        )

    async def _invoke(
        self,
        record: RunRecord,
        step: StepSpec,
        candidate: Candidate,
        payload: Any,
        text: str | None,
        trace: TraceContext,
    ) -> tuple[int, dict[str, Any]]:
        """One invoke of the invoke path, waiting for it when it became a task."""
        request_id = f"{record.run_id}:{step.id}{candidate.request_suffix}"
        remaining_ms = max(1, int((record.deadline_at - self.clock.wall()) * 1000))
        request = InvokeRequest.model_construct(
            capability=candidate.capability,
            text=text,  # a fallback capability gets the step's words too
            payload=payload,
            context_id=record.context_id,
            request_id=request_id,
            timeout_class=step.timeout_class if not candidate.is_fallback else None,
            max_hop=None,
            mode="sync",
            suspend=False,  # a step with no instance parks the run, not its own request
            on_duplicate="wait",
        )
        answer = await self.invoke.handle(
            request,
            trace,
            hop_budget=record.hop_budget,
            deadline_ms=remaining_ms,
            principal=record.principal,
        )
        if answer.status == 202:
            return await self._await_task(record, request_id)
        return answer.status, _body(answer)

    async def _await_task(self, record: RunRecord, task_id: str) -> tuple[int, dict[str, Any]]:
        """The answer of a step the invoke path ran as a task (an asynchronous class)."""
        pause = TASK_POLL_FIRST_S
        while True:
            document = await self.tasks.get(record.principal, task_id)
            if document.get("http_status") is not None:
                answer = document.get("answer")
                return int(document["http_status"]), answer if isinstance(answer, dict) else {}
            if self.clock.wall() >= record.deadline_at:
                return 504, {"error": {"code": "agent_timeout", "message": DEADLINE_PASSED}}
            await asyncio.sleep(pause)
            pause = min(TASK_POLL_MAX_S, pause * 2)


def _body(answer: Answer) -> dict[str, Any]:
    body = orjson.loads(answer.body)
    return body if isinstance(body, dict) else {}
