"""How deliveries are timed and repeated: timeout classes, retries, backoff, the fallbacks."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class TimeoutClassPolicy(BaseModel):
    """How long one delivery of a class may take, and how often it may be re-sent."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    timeout_s: float = Field(gt=0, le=3600)
    retries: int = Field(0, ge=0, le=10)
    asynchronous: bool = False
    deadline_s: float | None = Field(
        None, gt=0, le=86_400, description="whole request; default: every attempt and backoff"
    )


class DeliveryPolicy(BaseModel):
    """Retries, backoff, the retry budget and the fallback chain's time limits."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    backoff_s: list[Annotated[float, Field(ge=0, le=600)]] = Field(
        default_factory=lambda: [1.0, 2.0, 4.0],  # 1 s, 2 s, 4 s
        min_length=1,
    )
    jitter: float = Field(0.2, ge=0, le=1, description="each pause varies by up to this share")
    retry_budget_ratio: float = Field(0.2, ge=0, le=10)  # 20 % of in-flight
    retry_budget_min: int = Field(3, ge=0, le=10_000)  # ... and at least 3 at any time
    suspend_s: float = Field(120.0, ge=0, le=86_400, description="how long suspended requests wait")
    idempotency_ttl_s: float = Field(3600.0, gt=0, le=7 * 86_400)  # an hour
    degraded_answers: bool = Field(True, description="remember answers for the degraded fallback")
    answer_ttl_s: float = Field(3600.0, gt=0, le=7 * 86_400)
    similar_answers: float | None = Field(
        None,
        ge=0,
        le=1,
        description="a failed text request gets an earlier answer of the capability whose "
        "text is at least this close (cosine; needs the embeddings extra); unset: off",
    )

    def backoff(self, retry: int) -> float:
        """The pause before re-send number `retry` (1-based), before jitter."""
        return self.backoff_s[min(retry, len(self.backoff_s)) - 1]


# Query 2 s no retry; reasoning 5 s one retry; long 30 s, asynchronous (docs/policy.md).
DEFAULT_TIMEOUT_CLASSES = {
    "query": TimeoutClassPolicy(timeout_s=2.0),
    "reasoning": TimeoutClassPolicy(timeout_s=5.0, retries=1),
    "long": TimeoutClassPolicy(timeout_s=30.0, asynchronous=True),
}
