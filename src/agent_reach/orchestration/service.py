"""The orchestrator: what the workflow endpoints do, from a body to the caller's answer.

A run is checked (nothing runs when it is refused), stored under its owner and queued;
a synchronous caller then waits for it to end or park; its owner may cancel it. Runs
and saved workflows are the caller's own: another principal's id reads as unknown, as
tasks do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from agent_reach.backends.protocols import WorkflowStore
from agent_reach.clock import Clock
from agent_reach.context.service import ContextService
from agent_reach.errors import (
    KeyReused,
    RunEnded,
    UnknownRun,
    UnknownWorkflow,
    WorkflowRefused,
)
from agent_reach.ids import new_request_id
from agent_reach.model.invocations import DEFAULT_MAX_HOP
from agent_reach.model.keys import Principal, owned_key
from agent_reach.model.workflows import (
    FINAL_RUNS,
    NamedRunRequest,
    RunOptions,
    RunRecord,
    StepState,
    WorkflowBody,
    WorkflowDefinition,
    WorkflowRequest,
)
from agent_reach.observability.tracecontext import TraceContext, new_span_id
from agent_reach.orchestration.board import RECENT_RUNS, RunBoard
from agent_reach.orchestration.planning import plan, with_ids
from agent_reach.policy.policy import Policy
from agent_reach.security.ownership import require_not_observer, visible_owner
from agent_reach.wire.answer import Answer

RECENT_LIMIT = 50  # runs `GET /v1/workflows` lists by default
_BODY_FIELDS = set(WorkflowBody.model_fields)
SETTLE_GRACE_S = 2.0  # steps end at the run's deadline; the run needs a moment to settle


class Orchestrator:
    """Starts, reads and lists runs; saves and runs named workflows."""

    def __init__(
        self,
        board: RunBoard,
        definitions: WorkflowStore,
        contexts: ContextService,
        policy: Callable[[], Policy],
        clock: Clock,
        authorize: Callable[[Principal, str], None],
    ) -> None:
        self.authorize = authorize  # `Forbidden` unless the principal may invoke it
        self.board = board
        self.contexts = contexts
        self.definitions = definitions
        self.policy = policy
        self.clock = clock

    async def start(
        self,
        body: WorkflowBody,
        options: RunOptions,
        given_input: dict[str, Any],
        principal: Principal,
        trace: TraceContext,
        *,
        hop_budget: int | None = None,
        name: str | None = None,
    ) -> Answer:
        """Check, store and queue a run; 200 with its end, or 202 (async, parked) to poll.

        Observers may not run workflows; every capability the run names (steps, fallbacks,
        the summarizer) must be one the caller may invoke, and its context one it may use:
        else it is refused before anything runs.
        """
        require_not_observer(principal, "run workflows")
        for capability in _named_capabilities(body):
            self.authorize(principal, capability)
        if options.context_id is not None:
            await self.contexts.check_use(principal, options.context_id)
        policy = self.policy()
        body = with_ids(body)
        dag = plan(body, policy.workflows, given_input)
        run_id = options.request_id or new_request_id()
        key = owned_key(principal, run_id)
        now = self.clock.wall()
        deadline_s = min(options.deadline_s or policy.workflows.deadline_s, 86_400)
        workflow = body.model_dump(mode="json", exclude_none=True, include=_BODY_FIELDS)
        record = RunRecord(
            run_id=run_id,
            request_id=run_id,
            trace_id=trace.trace_id,
            span_id=new_span_id(),
            workflow=workflow,
            input=given_input,
            context_id=options.context_id,
            hop_budget=_hops(hop_budget, options.max_hop),
            created_at=now,
            deadline_at=now + deadline_s,
            principal=principal,
            parent_span_id=trace.parent_span_id,
            name=name,
            steps=[
                StepState(str(step.id), capability=step.action, depends_on=step.depends_on)
                for step in body.steps
            ],
            updated_at=now,
        )
        is_new = await self.board.submit(key, record, dag)
        if not is_new:
            existing = await self.board.load(key)
            if existing is None:
                raise UnknownRun(f"run {run_id!r} expired while it was being read")
            if (existing.workflow, existing.input) != (workflow, given_input):
                raise KeyReused(
                    "this request_id was used with a different workflow", request_id=run_id
                )
            record = existing
            if record.status == "pending":  # its queuing may have failed: queue it now
                await self.board.enqueue(key)
        if options.mode == "sync" and record.status not in FINAL_RUNS:
            left_s = max(0.0, record.deadline_at - self.clock.wall())
            waited = await self.board.wait(key, left_s + SETTLE_GRACE_S, is_new=is_new)
            record = waited or record
        return _answer(record)

    async def get(self, principal: Principal, run_id: str) -> dict[str, Any]:
        """The caller's own run as it stands."""
        record = await self.board.load(owned_key(principal, run_id))
        if record is None:
            raise UnknownRun(f"no workflow run {run_id!r} (unknown or expired)")
        return record.view()

    async def cancel(self, principal: Principal, run_id: str) -> Answer:
        """Cancel one of the caller's runs: 202 with the run as it stands (`status` says
        where it is until its holder has ended it `cancelled`); 409 once it has ended."""
        require_not_observer(principal, "cancel workflows")
        key = owned_key(principal, run_id)
        record = await self.board.load(key)
        if record is None:
            raise UnknownRun(f"no workflow run {run_id!r} (unknown or expired)")
        if record.status in FINAL_RUNS:
            raise RunEnded(f"run {run_id!r} has already ended ({record.status})", run_id=run_id)
        await self.board.cancel(key)
        return Answer.of(
            202, {**record.view(), "cancelled": True, "poll": f"/v1/workflows/{run_id}"}
        )

    async def recent(self, principal: Principal, limit: int = RECENT_LIMIT) -> list[dict[str, Any]]:
        """The newest runs the caller may see (every caller's for observers and admins)."""
        owner = visible_owner(principal)
        views = []
        for key in await self.board.store.recent(limit if owner is None else RECENT_RUNS):
            record = await self.board.load(key)
            if record is None or (owner is not None and record.principal.name != owner):
                continue
            views.append(_summary(record))
            if len(views) >= limit:
                break
        return views

    async def save(self, principal: Principal, definition: WorkflowDefinition) -> dict[str, Any]:
        """Check a definition and save it under its name (replacing an earlier one)."""
        require_not_observer(principal, "save workflows")
        plan(definition, self.policy().workflows, {}, declared_inputs=definition.inputs.keys())
        stored = definition.model_dump(mode="json", exclude_none=True)
        await self.definitions.put(owned_key(principal, definition.name), orjson.dumps(stored))
        return {
            "name": definition.name,
            "inputs": stored.get("inputs", {}),
            "steps": len(definition.steps),
        }

    async def definition(self, principal: Principal, name: str) -> WorkflowDefinition:
        raw = await self.definitions.get(owned_key(principal, name))
        if raw is None:
            raise UnknownWorkflow(f"no workflow saved under {name!r}")
        return WorkflowDefinition.model_validate_json(raw)

    async def run_named(
        self,
        principal: Principal,
        name: str,
        request: NamedRunRequest,
        trace: TraceContext,
        *,
        hop_budget: int | None = None,
    ) -> Answer:
        """Run a saved workflow with `request.input` over its declared inputs' defaults."""
        definition = await self.definition(principal, name)
        given = {**_defaults(definition), **request.input}
        missing = [n for n, spec in definition.inputs.items() if spec.required and n not in given]
        if missing:
            raise WorkflowRefused(
                f"workflow {name!r} needs the input {', '.join(missing)}",
                code="missing_input",
                missing=missing,
            )
        body = WorkflowBody.model_validate(
            definition.model_dump(include={"intent", "steps", "fallback", "aggregate"})
        )
        return await self.start(
            body, request, given, principal, trace, hop_budget=hop_budget, name=name
        )

    async def start_inline(
        self,
        request: WorkflowRequest,
        principal: Principal,
        trace: TraceContext,
        *,
        hop_budget: int | None = None,
    ) -> Answer:
        """`POST /v1/workflows/run`."""
        return await self.start(
            request, request, request.input, principal, trace, hop_budget=hop_budget
        )


def _defaults(definition: WorkflowDefinition) -> dict[str, Any]:
    return {n: spec.default for n, spec in definition.inputs.items() if not spec.required}


def _hops(from_header: int | None, from_body: int | None) -> int:
    if from_header is None:
        return DEFAULT_MAX_HOP if from_body is None else from_body
    return from_header if from_body is None else min(from_header, from_body)


def _answer(record: RunRecord) -> Answer:
    view = record.view()
    if record.status in FINAL_RUNS:
        return Answer.of(200, view)
    return Answer.of(202, {**view, "poll": f"/v1/workflows/{record.run_id}"})


def _summary(record: RunRecord) -> dict[str, Any]:
    """A run in a listing: its view without the steps' results."""
    view = record.view()
    view["steps"] = [
        {
            "id": s.id,
            "status": s.status,
            "depends_on": s.depends_on,
            "capability": s.capability,
            "agent_id": s.agent_id,
            "fallback_used": s.fallback_used,
            "reason": s.reason,
            "started_ms": s.started_ms,
            "ended_ms": s.ended_ms,
        }
        for s in record.steps
    ]
    view.pop("result", None)
    view.pop("conflicts", None)
    return view


def _named_capabilities(body: WorkflowBody) -> list[str]:
    """Every capability a run names: its steps' actions and fallbacks, its own fallback
    and its summarizer (steps routed by text are checked when they are routed)."""
    named = [c for step in body.steps for c in (step.action, step.fallback) if c]
    named += [c for c in (body.fallback, body.aggregate and body.aggregate.capability) if c]
    return sorted(set(named))
