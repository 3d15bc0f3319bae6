"""What the router learns: corrected texts kept as examples, weights adapted to outcomes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class LearningPolicy(BaseModel):
    """What the router learns from corrections (`POST /v1/feedback`) and 421 answers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    correctable_s: float = Field(
        3600.0, ge=0, le=7 * 86_400, description="how long a routed text may be corrected"
    )  # the original write-up: "correct routing from the last hour's results"
    example_ttl_s: float = Field(
        30 * 86_400.0, gt=0, le=365 * 86_400, description="how long a learned example lasts"
    )
    max_per_capability: int = Field(
        200, ge=1, le=10_000, description="learned examples kept per capability, newest first"
    )


class AdaptationPolicy(BaseModel):
    """Online adaptation of factor weights to outcomes (routing/adaptation.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False  # off: the weights are exactly the policy's
    rate: float = Field(0.05, gt=0, le=1, description="step per delivery outcome")
    low: float = Field(0.5, ge=0, le=1, description="a weight stays >= low x its policy value")
    high: float = Field(2.0, ge=1, le=10, description="... and <= high x its policy value")
