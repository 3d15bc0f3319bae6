"""The policy's `[delegation]` section: how far a chain of agents may reach."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# A chain caller -> A -> B -> C -> D: four agents deep. Longer chains are pass-the-buck
# more often than they are work, and the hop limit (5) stops the rest.
DEFAULT_MAX_DEPTH = 4
DEFAULT_OFFERS = 3  # candidates asked for an offer at once, for a negotiated capability


class DelegationPolicy(BaseModel):
    """Limits of delegation on behalf of a caller (`[[access.delegate]]` says who may)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_depth: int = Field(DEFAULT_MAX_DEPTH, ge=1, le=32, description="agents in one chain")
    offers: int = Field(DEFAULT_OFFERS, ge=1, le=16, description="candidates asked for offers")
