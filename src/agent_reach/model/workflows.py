"""Workflows: a DAG of capability steps as a caller submits it, and a run as it is kept.

The request models are the wire bodies of `POST /v1/workflows/run` and of a saved
definition; `RunRecord` and `StepState` are what the run store holds (dataclasses:
the coordinator writes one after every step, and orjson encodes them directly).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from agent_reach.model.agents import Capability, TimeoutClass
from agent_reach.model.keys import ANONYMOUS, Principal

STEP_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
AGGREGATE_STEP = "_aggregate"  # the summarizer step: no caller id can start with "_"
DEFAULT_MAX_STEPS = 64  # the original flows had 2-5 steps; a 50-step DAG still fits
DEFAULT_MAX_PARALLEL = 16  # steps of one run in flight at once
DEFAULT_RUN_DEADLINE_S = 300.0  # the whole run, parking included, unless the caller says less
MAX_DECLARED_STEPS = 1000  # beyond this the body is refused by schema, before any planning

# A run id is the caller's request id (or a generated one) and prefixes every step's
# request id: at most 64 characters, so `<run_id>:<step_id>:fallback` stays a request id.
RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,63}$"
RunId = Annotated[str, StringConstraints(pattern=RUN_ID_PATTERN)]
StepId = Annotated[str, StringConstraints(pattern=STEP_ID_PATTERN)]
WorkflowName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
StepStatus = Literal[
    "pending", "running", "ok", "fallback", "failed", "skipped", "parked", "cancelled"
]
RunStatus = Literal["pending", "running", "ok", "partial", "parked", "error", "cancelled"]
FINISHED_STEPS = frozenset({"ok", "fallback", "failed", "skipped", "cancelled"})
SERVED_STEPS = frozenset({"ok", "fallback"})
FINAL_RUNS = frozenset({"ok", "partial", "error", "cancelled"})


def _deliverable(value: Any) -> Any:
    """`value` when it can travel as JSON (integers within 64 bits, like deliveries)."""
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError as exc:
        raise ValueError(f"the value cannot be delivered as JSON: {exc}") from None
    return value


class WorkflowPolicy(BaseModel):
    """The policy's limits for workflows (`[workflows]` in the policy file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_steps: int = Field(DEFAULT_MAX_STEPS, ge=1, le=MAX_DECLARED_STEPS)
    max_parallel: int = Field(DEFAULT_MAX_PARALLEL, ge=1, le=1024)
    deadline_s: float = Field(DEFAULT_RUN_DEADLINE_S, gt=0, le=86_400)


class StepSpec(BaseModel):
    """One step: a capability (`action`) or text to route, its params and its fallbacks."""

    model_config = ConfigDict(extra="forbid")

    id: StepId | None = None
    action: Capability | None = None
    text: Annotated[str, StringConstraints(min_length=1, max_length=4000)] | None = None
    param: Any = None
    depends_on: list[StepId] = Field(default_factory=list, max_length=MAX_DECLARED_STEPS)
    fallback: Capability | None = None
    timeout_class: TimeoutClass | None = None
    optional: bool = False

    @field_validator("param")
    @classmethod
    def _param_is_json(cls, param: Any) -> Any:
        return _deliverable(param)

    @model_validator(mode="after")
    def _action_or_text(self) -> StepSpec:
        if (self.action is None) == (self.text is None):
            raise ValueError("give a step exactly one of `action` and `text`")
        return self


class Aggregate(BaseModel):
    """How the run's `result` is made: `merge` in priority order, or a summarizer capability."""

    model_config = ConfigDict(extra="forbid")

    merge: list[StepId] | None = Field(None, min_length=1)
    capability: Capability | None = None

    @model_validator(mode="after")
    def _one_way(self) -> Aggregate:
        if self.merge is not None and self.capability is not None:
            raise ValueError("aggregate with `merge` or with `capability`, not both")
        return self


class WorkflowBody(BaseModel):
    """What every workflow has: its intent, steps, fallback and aggregation."""

    model_config = ConfigDict(extra="forbid")

    intent: Annotated[str, StringConstraints(max_length=200)] | None = None
    steps: list[StepSpec] = Field(min_length=1, max_length=MAX_DECLARED_STEPS)
    fallback: Capability | None = None
    aggregate: Aggregate | None = None


class RunOptions(BaseModel):
    """How one run is made: sync or async, its id, context, deadline and hop budget."""

    model_config = ConfigDict(extra="forbid")

    context_id: Annotated[str, StringConstraints(max_length=128)] | None = None
    request_id: RunId | None = None
    mode: Literal["sync", "async"] = "sync"
    deadline_s: float | None = Field(None, gt=0, le=86_400)
    max_hop: int | None = Field(None, ge=0, le=64)


class WorkflowRequest(WorkflowBody, RunOptions):
    """The body of `POST /v1/workflows/run`: a definition inline, with its `input`."""

    input: dict[str, Any] = Field(default_factory=dict)

    @field_validator("input")
    @classmethod
    def _input_is_json(cls, given: dict[str, Any]) -> dict[str, Any]:
        return dict(_deliverable(given))


class InputSpec(BaseModel):
    """One input a named workflow takes."""

    model_config = ConfigDict(extra="forbid")

    required: bool = True
    default: Any = None
    description: Annotated[str, StringConstraints(max_length=500)] | None = None


class WorkflowDefinition(WorkflowBody):
    """The body of `POST /v1/workflows`: a workflow saved under `name` with its inputs."""

    name: WorkflowName
    description: Annotated[str, StringConstraints(max_length=2000)] | None = None
    inputs: dict[str, InputSpec] = Field(default_factory=dict)

    @field_validator("inputs", mode="before")
    @classmethod
    def _names_are_enough(cls, inputs: object) -> object:
        """`inputs: [order_no, limit]` is short for each of them required."""
        return {str(name): {} for name in inputs} if isinstance(inputs, list) else inputs


class NamedRunRequest(RunOptions):
    """The body of `POST /v1/workflows/{name}/run`."""

    input: dict[str, Any] = Field(default_factory=dict)

    @field_validator("input")
    @classmethod
    def _input_is_json(cls, given: dict[str, Any]) -> dict[str, Any]:
        return dict(_deliverable(given))


@dataclass  # no slots: orjson serializes slotted dataclasses ~3x slower
class StepState:
    """One step of a run as callers see it; `tried` maps each capability tried to its outcome.

    `started_ms`/`ended_ms` count from the run's creation; `reason` says why a step was
    skipped, parked or failed.
    """

    id: str
    status: StepStatus = "pending"
    capability: str | None = None
    depends_on: list[str] = field(default_factory=list)
    agent_id: str | None = None
    result: Any = None
    attempts: int = 0
    started_ms: float | None = None
    ended_ms: float | None = None
    fallback_used: str | None = None
    reason: str | None = None
    error: dict[str, Any] | None = None
    tried: dict[str, str] = field(default_factory=dict)


@dataclass
class RunRecord:
    """A run as the run store holds it: the definition, who owns it, and where it stands."""

    run_id: str
    request_id: str
    trace_id: str
    span_id: str
    workflow: dict[str, Any]  # the validated WorkflowBody, step ids filled in
    input: dict[str, Any]
    context_id: str | None
    hop_budget: int
    created_at: float
    deadline_at: float
    principal: Principal = ANONYMOUS
    parent_span_id: str | None = None  # the caller's span, when it sent a traceparent
    name: str | None = None
    status: RunStatus = "pending"
    steps: list[StepState] = field(default_factory=list)
    result: Any = None
    conflicts: list[dict[str, Any]] | None = None
    updated_at: float = 0.0
    parked_until: float | None = None
    resumes: int = 0  # parked, then resumed once a capability came back
    takeovers: int = 0  # found mid-run by a coordinator after its holder died

    def view(self) -> dict[str, Any]:
        """The answer callers get (`POST /v1/workflows/run`, `GET /v1/workflows/{id}`)."""
        view: dict[str, Any] = {
            "run_id": self.run_id,
            "request_id": self.request_id,
            "trace_id": self.trace_id,
            "status": self.status,
            "intent": self.workflow.get("intent"),
            "name": self.name,
            "steps": self.steps,
            "result": self.result,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "resumes": self.resumes,
            "takeovers": self.takeovers,
        }
        if self.conflicts is not None:
            view["conflicts"] = self.conflicts
        if self.status == "parked":
            view["parked_until"] = self.parked_until
        return view


class RunView(BaseModel):
    """A run as callers read it (the SDK's answer to `Orchestrator.run`)."""

    model_config = ConfigDict(extra="allow")

    run_id: str
    request_id: str
    trace_id: str
    status: RunStatus
    intent: str | None = None
    name: str | None = None
    steps: list[StepState] = Field(default_factory=list)
    result: Any = None
    conflicts: list[dict[str, Any]] | None = None
    poll: str | None = None

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_RUNS

    def step(self, step_id: str) -> StepState:
        """The step with this id (KeyError when there is none)."""
        for state in self.steps:
            if state.id == step_id:
                return state
        raise KeyError(step_id)
