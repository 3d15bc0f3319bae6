"""Negotiation (docs/mesh.md, "Negotiation"): what a registration declares, what an
offer endpoint receives and answers, and what the coordinator made of each offer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

DEFAULT_OFFER_TIMEOUT_MS = 200
MAX_OFFER_TIMEOUT_MS = 5_000  # an offer is a quick yes or no, not the work

# accepted: taken into the choice; declined: the agent said no; timeout: no answer within
# the offer's timeout; error: unreachable or not an offer; over_budget: its cost passes
# the budget left; not_asked: it negotiates, but was beyond the policy's `offers`.
OfferOutcomeKind = Literal["accepted", "declined", "timeout", "error", "over_budget", "not_asked"]


class NegotiateSpec(BaseModel):
    """A registration's `negotiate`: where the coordinator asks for offers, and how long
    it waits for one."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint: Annotated[str, StringConstraints(min_length=1, max_length=2048)]
    timeout_ms: int = Field(DEFAULT_OFFER_TIMEOUT_MS, ge=1, le=MAX_OFFER_TIMEOUT_MS)


class OfferRequest(BaseModel):
    """What an offer endpoint receives: the task as the agent would get it, without its
    context or payload. `deadline_ms`: what is left of the request's deadline;
    `budget_left`: cost units left in the chain's budget (null: no budget)."""

    model_config = ConfigDict(extra="allow")

    capability: str
    text: str | None = None
    params: dict[str, Any] | None = None
    deadline_ms: int
    budget_left: float | None = None


class OfferAnswer(BaseModel):
    """What an offer endpoint answers. Only `accept` is required; a missing `confidence`
    counts as 1, a missing `eta_ms` or `cost` as none."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    accept: bool
    eta_ms: float | None = Field(None, ge=0)
    confidence: float | None = Field(None, ge=0, le=1)
    cost: float | None = Field(None, ge=0)


@dataclass  # no slots: orjson serializes slotted dataclasses ~3x slower
class OfferOutcome:
    """One candidate's offer as the routing decision shows it: what it answered, and the
    combined score the choice used (for an accepted offer)."""

    outcome: OfferOutcomeKind
    accept: bool | None = None  # what the agent said; None when it said nothing
    eta_ms: float | None = None
    confidence: float | None = None
    cost: float | None = None
    combined: float | None = None
    elapsed_ms: float | None = None
    error: str | None = None

    @property
    def stands(self) -> bool:
        """Whether the instance may get the delivery."""
        return self.outcome == "accepted"


@dataclass  # no slots: orjson serializes slotted dataclasses ~3x slower
class Negotiated:
    """A decision's negotiation: who was asked with what limits, who turned it down
    (declined, silent, failed or over budget), and whether the generic agents took over
    because nobody accepted."""

    asked: list[str]
    deadline_ms: int
    budget_left: float | None
    turned_down: list[str]
    fallback: Literal["generic"] | None = None
