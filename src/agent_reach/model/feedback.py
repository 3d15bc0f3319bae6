"""What the router learns from: routed texts, corrections, and the examples they become."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints, model_validator

from agent_reach.model.agents import Capability

RequestId = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class FeedbackRequest(BaseModel):
    """`POST /v1/feedback`: the capability that should have served an earlier text request,
    or a rating of the work of the instance that served an earlier request (one of them)."""

    model_config = ConfigDict(extra="forbid")

    request_id: RequestId
    capability: Capability | None = None
    rating: Literal["good", "bad"] | None = None

    @model_validator(mode="after")
    def _one_of(self) -> FeedbackRequest:
        if (self.capability is None) == (self.rating is None):
            raise ValueError("give either capability (a correction) or rating (good or bad)")
        return self


class RoutedText(BaseModel):
    """A text request as routed, kept so its caller (and only its caller) can correct it."""

    request_id: str
    principal: str
    text: str
    capability: str | None


class LearnedExample(BaseModel):
    """A text the router learned: `positive` (it belongs to the capability, from feedback)
    or `negative` (the capability's agent answered 421 "not mine" to it)."""

    id: str
    capability: str
    text: str
    kind: Literal["positive", "negative"]
    source: Literal["feedback", "misdirected"]
    request_id: str
    principal: str
    learned_at: float
    expires_at: float
