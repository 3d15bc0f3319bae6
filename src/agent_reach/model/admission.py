"""Admission and fleet load as the policy file states them: limits, not mechanisms."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from agent_reach.model.agents import Capability

DEFAULT_RETRY_AFTER_S = 1.0  # a shed request may come back after this (Retry-After)
# Issue 17, from the original system: "when order-service has more than 100 waiting,
# lower its weight and divert".
DEFAULT_MAX_QUEUE = 100


class AdmissionPolicy(BaseModel):
    """How many requests each capability may hold at once on one coordinator, and what a
    refused request is told; `AR_MAX_IN_FLIGHT` bounds all of them together."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_in_flight: dict[Capability, Annotated[int, Field(ge=1, le=1_000_000)]] = Field(
        default_factory=dict, description="capability -> requests in flight at most"
    )
    retry_after_s: float = Field(DEFAULT_RETRY_AFTER_S, gt=0, le=3600)
    degraded: bool = Field(True, description="answer a refused request with a remembered answer")
    max_queue: int = Field(
        DEFAULT_MAX_QUEUE,
        ge=1,
        le=1_000_000,
        description="requests in flight at one instance, fleet-wide, beyond which it is "
        "down-weighted; an instance's own `max_queue` wins",
    )
