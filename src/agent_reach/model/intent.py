"""The agent that parses intent for unsure text, as the policy names it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# The original system: "below 10 requests/s ask the LLM; above 50/s use embeddings".
DEFAULT_RATE_PER_S = 10.0
DEFAULT_ASK_BELOW = 0.6  # a best text match under this is unsure enough to escalate


class IntentEscalation(BaseModel):
    """When the policy's `intent_parser` is asked, and how often at most."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    below: float = Field(DEFAULT_ASK_BELOW, ge=0, le=1, description="best confidence under this")
    rate_per_s: float = Field(DEFAULT_RATE_PER_S, gt=0, le=100_000)
    burst: int = Field(10, ge=1, le=100_000)
