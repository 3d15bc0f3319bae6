"""Running a run: every step whose dependencies are served, in parallel, up to the limit.

`RunExecutor.advance` takes a run wherever it stands (new, resumed after parking, or
taken over from a dead coordinator), runs what can run, saves the record after every
change, and returns once the run is final or parked. Steps already finished are
never run again; a step that was running when its coordinator died is run again
with the same request id, which the invoke path answers from its idempotency record,
or takes over from the dead coordinator: re-sent only to an instance that declared
`idempotent`, else failed `outcome_unknown` (its fallbacks still tried).
Before it starts steps it asks whether the run was cancelled (a mark in the run
store, `RunStore.cancel`): once it was, no step starts, the ones in flight finish,
and the run ends `cancelled`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from agent_reach.clock import Clock
from agent_reach.context.service import ContextService
from agent_reach.context.tokens import caller_grant
from agent_reach.errors import ReachError
from agent_reach.model.workflows import (
    AGGREGATE_STEP,
    FINISHED_STEPS,
    MAX_DECLARED_STEPS,
    SERVED_STEPS,
    RunRecord,
    StepSpec,
    StepState,
    WorkflowBody,
    WorkflowPolicy,
)
from agent_reach.observability.metrics import Metrics
from agent_reach.observability.tracing import Tracer
from agent_reach.orchestration.aggregation import merge, summary_payload
from agent_reach.orchestration.planning import Plan, plan
from agent_reach.orchestration.steps import DEADLINE_PASSED, StepRunner
from agent_reach.orchestration.templates import Scope, TemplateError, has_templates, resolve
from agent_reach.policy.policy import Policy

log = structlog.get_logger("agent_reach.orchestration")

Save = Callable[[RunRecord], Awaitable[None]]
Cancelled = Callable[[], Awaitable[bool]]  # whether the run was cancelled, asked of the store
CANCELLED = "the run was cancelled before this step started"
_ANY_SIZE = WorkflowPolicy(max_steps=MAX_DECLARED_STEPS)  # a stored run was checked at submission


class RunExecutor:
    """Advances runs; holds no state of its own between calls."""

    def __init__(
        self,
        steps: StepRunner,
        contexts: ContextService,
        policy: Callable[[], Policy],
        clock: Clock,
        tracer: Tracer,
        metrics: Metrics,
    ) -> None:
        self.steps = steps
        self.contexts = contexts
        self.policy = policy
        self.clock = clock
        self.tracer = tracer
        self.metrics = metrics

    async def advance(
        self, record: RunRecord, save: Save, cancelled: Cancelled, dag: Plan | None = None
    ) -> None:
        """Run what can run; on return the record is saved, final or parked.

        `cancelled` is asked before each batch of steps starts (one store read). `dag` is
        the run's plan when the caller has it (else it is made from the record).
        """
        if dag is None:
            dag = plan(WorkflowBody.model_validate(record.workflow), _ANY_SIZE, record.input)
        states = {state.id: state for state in record.steps}
        for state in states.values():
            if state.status in ("running", "parked"):
                state.status = "pending"  # run again: its request id makes that safe
        record.status = "running"
        context = await self._context(record, dag)
        limit = self.policy().workflows.max_parallel
        in_flight = 0
        ended = asyncio.Event()  # set by each step as it ends: one wake-up, not a scan of all
        dirty = True

        async def serve(spec: StepSpec, state: StepState) -> None:
            try:
                await self._serve(record, dag, spec, state, states, context)
            finally:
                ended.set()

        stopped = False
        async with asyncio.TaskGroup() as group:
            while True:
                dirty |= self._settle_blocked(dag, states, record)
                ready = [
                    step_id
                    for step_id in dag.order
                    if states[step_id].status == "pending"
                    and all(states[d].status in SERVED_STEPS for d in dag.steps[step_id].depends_on)
                ][: max(0, limit - in_flight)]
                if ready and await cancelled():  # no await between this and the starts
                    stopped = dirty = True
                    self._cancel_pending(record, states)
                    ready = []
                for step_id in ready:
                    state = states[step_id]
                    state.status = "running"
                    state.started_ms = (self.clock.wall() - record.created_at) * 1000
                    group.create_task(serve(dag.steps[step_id], state))
                    in_flight += 1
                    dirty = True
                if dirty:
                    await self._save(record, save)
                    dirty = False
                if not in_flight:
                    break
                ended.clear()
                running = sum(state.status == "running" for state in states.values())
                if running == in_flight:  # nothing ended while the record was being saved
                    await ended.wait()
                in_flight = sum(state.status == "running" for state in states.values())
                dirty = True
        if stopped:
            record.status, record.result = "cancelled", _served(dag, states)
        else:
            await self._finish(record, dag, states, cancelled)
        await self._save(record, save)

    def _cancel_pending(self, record: RunRecord, states: dict[str, StepState]) -> None:
        """Every step that has not started (parked ones included) will not: cancelled."""
        ended_ms = (self.clock.wall() - record.created_at) * 1000
        for state in states.values():
            if state.status in ("pending", "parked"):
                state.status, state.reason, state.ended_ms = "cancelled", CANCELLED, ended_ms
                self.metrics.child(self.metrics.workflow_steps, "cancelled").inc()

    async def _serve(
        self,
        record: RunRecord,
        dag: Plan,
        spec: StepSpec,
        state: StepState,
        states: dict[str, StepState],
        context: Any,
    ) -> None:
        """One step: its templates resolved from what its dependencies answered, then served."""
        if self.clock.wall() >= record.deadline_at:
            self._fail(record, state, "deadline", DEADLINE_PASSED)
            return
        results = {s: states[s].result for s in dag.ancestors[str(spec.id)]}
        try:
            scope = Scope(results, context, record.input)
            payload = resolve(spec.param, scope)
            text = resolve(spec.text, scope) if spec.text is not None else None
        except TemplateError as exc:
            self._fail(record, state, "bad_template", str(exc))
            return
        await self.steps.serve(record, spec, state, payload, text, dag.body.fallback)

    def _settle_blocked(self, dag: Plan, states: dict[str, StepState], record: RunRecord) -> bool:
        """Skip pending steps whose dependency failed or was skipped; say if any changed."""
        changed = False
        for step_id in dag.order:  # in order: a skip reaches dependants of dependants at once
            state = states[step_id]
            if state.status != "pending":
                continue
            for needed in dag.steps[step_id].depends_on:
                if states[needed].status in ("failed", "skipped"):
                    state.status = "skipped"
                    state.reason = f"depends on {needed!r}, which {_verb(states[needed].status)}"
                    self.metrics.child(self.metrics.workflow_steps, "skipped").inc()
                    changed = True
                    break
        return changed

    async def _finish(
        self, record: RunRecord, dag: Plan, states: dict[str, StepState], cancelled: Cancelled
    ) -> None:
        """The run's status and result once nothing more can run."""
        required = [s for s in dag.order if not dag.steps[s].optional]
        failed = any(states[s].status in ("failed", "skipped") for s in required)
        parked = any(state.status == "parked" for state in states.values())
        if parked and not failed:
            record.status = "parked"
            if record.parked_until is None:  # the suspended queue's rule: one window per run
                suspend_s = self.policy().delivery.suspend_s
                record.parked_until = min(record.deadline_at, self.clock.wall() + suspend_s)
            return
        for state in states.values():  # a failed run settles its parked steps too
            if state.status not in FINISHED_STEPS:
                state.status, state.reason = "failed", "the run failed before it could run"
        served = _served(dag, states)
        aggregate = dag.body.aggregate
        record.result, record.conflicts = served, None
        if not failed and aggregate is not None and aggregate.merge is not None:
            record.result, record.conflicts = merge(served, aggregate.merge)
        if not failed and aggregate is not None and aggregate.capability is not None:
            state = self._summary_state(record, aggregate.capability)
            if state.status not in SERVED_STEPS and await cancelled():  # a step too
                self._cancel_pending(record, {state.id: state})
                record.status = "cancelled"
                return
            failed = not await self._summarize(record, dag, aggregate.capability, served)
        optional_missed = any(s.status not in SERVED_STEPS for s in states.values())
        record.status = "error" if failed else "partial" if optional_missed else "ok"

    async def _summarize(
        self, record: RunRecord, dag: Plan, capability: str, served: dict[str, Any]
    ) -> bool:
        """The summarizer step: one more step whose result is the run's result."""
        state = self._summary_state(record, capability)
        if state.status not in SERVED_STEPS:
            spec = StepSpec.model_construct(  # "_aggregate": an id no caller's step can have
                id=AGGREGATE_STEP, action=capability, text=None, param=None, timeout_class=None
            )
            state.status = "running"
            state.started_ms = (self.clock.wall() - record.created_at) * 1000
            payload = summary_payload(dag.body.intent, served)
            await self.steps.serve(record, spec, state, payload, None, None)
        if state.status == "parked":
            state.status = "failed"
        if state.status in SERVED_STEPS:
            record.result = state.result
            return True
        return False

    @staticmethod
    def _summary_state(record: RunRecord, capability: str) -> StepState:
        """The summarizer step's state, added to the record the first time."""
        state = next((s for s in record.steps if s.id == AGGREGATE_STEP), None)
        if state is None:
            state = StepState(AGGREGATE_STEP, capability=capability)
            record.steps.append(state)
        return state

    async def _context(self, record: RunRecord, dag: Plan) -> Any:
        """The run's context document, read once, when some template reads it."""
        if record.context_id is None or not any(
            has_templates([s.param, s.text]) for s in dag.steps.values()
        ):
            return None
        try:
            view = await self.contexts.read(record.context_id, caller_grant(record.principal))
        except ReachError as exc:
            log.info("workflow_context_unreadable", run_id=record.run_id, code=exc.code)
            return None
        return view.document

    async def _save(self, record: RunRecord, save: Save) -> None:
        record.updated_at = self.clock.wall()
        await save(record)

    def _fail(self, record: RunRecord, state: StepState, code: str, message: str) -> None:
        """A step that could not be sent at all."""
        state.status, state.reason = "failed", message
        state.error = {"code": code, "message": message}
        state.ended_ms = (self.clock.wall() - record.created_at) * 1000
        self.metrics.child(self.metrics.workflow_steps, "failed").inc()


def _served(dag: Plan, states: dict[str, StepState]) -> dict[str, Any]:
    """The results of the steps that were served, by step id in plan order."""
    return {s: states[s].result for s in dag.order if states[s].status in SERVED_STEPS}


def _verb(status: str) -> str:
    return "failed" if status == "failed" else "was skipped"
