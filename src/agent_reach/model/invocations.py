"""Invocations: what a caller asks for, what an agent receives, what the caller gets back."""

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
from pydantic_core import PydanticCustomError

from agent_reach.model.agents import Capability, HealthStatus, TimeoutClass
from agent_reach.model.decisions import RouteDecision

DEFAULT_MAX_HOP = 5  # five hops stop two agents bouncing a request forever
REQUEST_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$"

# The error type of a body that lacks every one of several alternative fields; its
# context names them (`fields`), and the API reports a problem at each.
ONE_OF_TYPE = "missing_one_of"

RequestId = Annotated[str, StringConstraints(pattern=REQUEST_ID_PATTERN)]
Status = Literal["ok", "fallback", "degraded", "suspended", "queued", "running", "error"]


class RouteRequest(BaseModel):
    """What to route: a capability tag, or user text to match (at least one)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    capability: Capability | None = None
    text: Annotated[str, StringConstraints(min_length=1, max_length=4000)] | None = None
    context_id: Annotated[str, StringConstraints(max_length=128)] | None = None
    request_id: RequestId | None = None

    @field_validator("text")
    @classmethod
    def _text_has_words(cls, text: str | None) -> str | None:
        if text is not None and not text.strip():
            raise ValueError("the text is blank: give the user's words to route")
        return text

    @model_validator(mode="after")
    def _capability_or_text(self) -> RouteRequest:
        if self.capability is None and self.text is None:
            raise PydanticCustomError(
                ONE_OF_TYPE,
                "give `capability` (a capability name, e.g. inventory.check) or `text` "
                "(the user's words to route): the body has neither",
                {"fields": ["capability", "text"]},
            )
        return self


MAX_TOP_K = 50  # ranked candidates a caller may ask for: a prompt's worth of tools
DEFAULT_TOP_K = 3  # the choice and its two nearest alternatives


class RankedRouteRequest(RouteRequest):
    """The body of `POST /v1/route`: a route request, and for text how many ranked
    candidates to answer beside the decision."""

    top_k: int = Field(
        DEFAULT_TOP_K,
        ge=1,
        le=MAX_TOP_K,
        description="for text: the best capabilities the caller may invoke, answered as `ranked`",
    )


class InvokeRequest(RouteRequest):
    """The body of `POST /v1/invoke`."""

    @field_validator("payload")
    @classmethod
    def _payload_is_deliverable(cls, payload: Any) -> Any:
        try:
            orjson.dumps(payload)  # JSON allows any integer; deliveries carry 64-bit ones
        except orjson.JSONEncodeError as exc:
            raise ValueError(f"the payload cannot be delivered as JSON: {exc}") from None
        return payload

    payload: Any = None
    max_hop: int | None = Field(None, ge=0, le=64)
    budget: float | None = Field(
        None,
        gt=0,
        le=1e12,
        description="cost units the request and every delegation it leads to may spend",
    )
    timeout_class: TimeoutClass | None = None
    mode: Literal["sync", "async", "fanout"] = Field(
        "sync", description="fanout: a text asking several things runs as a parallel workflow"
    )
    suspend: bool = Field(
        True, description="no instance can take it now: park it (202 and a task) or fail (503)"
    )
    on_duplicate: Literal["wait", "reject"] = Field(
        "wait", description="a request_id already in progress: wait for its answer, or 409"
    )


@dataclass  # no slots: orjson serializes slotted dataclasses ~3x slower
class Attempt:
    """One delivery to one instance: who, how long, and how it ended."""

    agent_id: str
    number: int
    outcome: str  # "ok" or the failure's error code (agent_error, agent_timeout, ...)
    duration_ms: float
    http_status: int | None = None
    error: str | None = None
    cost: float | None = None  # what the agent reported it cost (`X-Reach-Cost`)


@dataclass  # no slots: orjson serializes slotted dataclasses ~3x slower
class InvokeResult:
    """The answer of `POST /v1/invoke`."""

    request_id: str
    trace_id: str
    status: Status
    agent_id: str | None
    result: Any
    route: RouteDecision
    attempts: list[Attempt] = field(default_factory=list)
    # How the agent's answer became `result`: "json" as sent, "text" ({"text": ...}),
    # "xml" ({"xml": ...} or the registration's mapping), "empty" (null).
    normalized: str = "json"


class DisabledBy(BaseModel):
    """An admin's kill switch on an instance: who pulled it, and when (wall seconds)."""

    by: str | None
    at: float | None


class InstanceFailure(BaseModel):
    """An instance that could not take a suspended request: its health, and why."""

    agent_id: str
    status: HealthStatus
    last_error: str | None = Field(None, description="its latest failed delivery or probe")
    disabled: DisabledBy | None = Field(
        None, description="an admin disabled it (POST /v1/agents/{id}/disable): who, when"
    )


class TaskView(BaseModel):
    """`GET /v1/tasks/{id}` and the 202 answer that points to it."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    task_id: str
    request_id: str
    trace_id: str
    status: Status
    created_at: float | None = None
    updated_at: float | None = None
    suspended_until: float | None = None
    instances: list[InstanceFailure] | None = Field(
        None, description="suspended: each instance that could have taken it, and why not"
    )
    poll: str | None = None
    http_status: int | None = Field(None, description="set once finished: the answer's status")
    answer: Any = Field(None, description="set once finished: the invoke answer or error body")

    @property
    def is_finished(self) -> bool:
        return self.http_status is not None
