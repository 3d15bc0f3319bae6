"""Delegation on behalf of a caller: the policy's `[delegation]` section, and a chain."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from agent_reach.model.keys import Principal, Role

# A chain caller -> A -> B -> C -> D: four agents deep. Longer chains are pass-the-buck
# more often than they are work, and the hop limit (5) stops the rest.
DEFAULT_MAX_DEPTH = 4
DEFAULT_OFFERS = 3  # candidates asked for an offer at once, for a negotiated capability


class DelegationPolicy(BaseModel):
    """Limits of delegation on behalf of a caller (`[[access.delegate]]` says who may)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_depth: int = Field(DEFAULT_MAX_DEPTH, ge=1, le=32, description="agents in one chain")
    offers: int = Field(DEFAULT_OFFERS, ge=1, le=16, description="candidates asked for offers")


@dataclass(frozen=True, slots=True)
class Link:
    """One agent of a delegation chain: its principal, the instance and the capability
    it was delivered."""

    principal: str
    domain: str | None
    role: Role
    instance: str
    capability: str


@dataclass(frozen=True, slots=True)
class Chain:
    """A delegation: on whose behalf (`caller`), through whom (`links`, oldest first; the
    last is the agent holding it), within what (scope, context, hops, budget, expiry).

    `root` is the first request's id: the chain's budget is kept under it.
    """

    caller: Principal
    links: tuple[Link, ...]
    root: str
    scope: tuple[str, ...]
    context_id: str | None
    hop: int
    budget: float | None
    expires_at: float  # wall clock

    @property
    def holder(self) -> Link:
        return self.links[-1]

    @property
    def depth(self) -> int:
        return len(self.links)
