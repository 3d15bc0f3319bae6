"""Routing decisions: the candidates with their factor scores, and what decided."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_reach.model.offers import Negotiated, OfferOutcome

Rule = Literal["exact", "best", "learned", "margin", "no_match", "generic", "no_instance"]


@dataclass  # no slots: orjson serializes slotted dataclasses ~3x slower
class Candidate:
    """One instance considered for a capability, with each factor in [0, 1]."""

    capability: str
    agent_id: str
    score: float
    factors: dict[str, float]
    match: dict[str, float] = field(default_factory=dict)
    # the outcome counts behind `factors.quality` (mesh/quality.py); absent kinds are 0
    outcomes: Mapping[str, int] = field(default_factory=dict)
    offer: OfferOutcome | None = None  # its answer when asked for an offer (negotiation)


@dataclass  # no slots: orjson serializes slotted dataclasses ~3x slower
class TextMatch:
    """How a text was matched: what was asked, the thresholds that decided, what was learned.

    Candidates' `factors.match` are calibrated confidences (the probability that routing
    there is right, fitted on the catalog); `match.raw` is the matchers' blend before it.
    """

    matchers: list[str]  # asked, in order
    pending: list[str]  # in the policy but not ready yet (the encoder loading, a first fit)
    calibrated: bool  # False: too few cards to calibrate, raw scores were used as they are
    min_confidence: float  # the floor applied: uncalibrated, the policy's plus its margin
    margin: float  # the threshold; RouteDecision.margin is the gap that was measured
    learned: dict[str, str] | None = None  # the learned example that matched the text exactly
    not_mine: list[str] = field(default_factory=list)  # capabilities that answered 421 to it
    params: dict[str, Any] | None = None  # what the chosen capability's input_schema pulled out
    encoder: str | None = None  # the embedding matcher's: "packaged" or "remote:<model>"


@dataclass  # no slots: orjson serializes slotted dataclasses ~3x slower
class ThresholdCheck:
    """One threshold a text was held to, and the comparison that actually held
    (routing/explanation.py writes the statement; every view shows it as it is)."""

    name: Literal["min_confidence", "margin"]
    value: float | None  # the best confidence, or the gap to the next capability (None: none)
    threshold: float
    passed: bool  # value >= threshold (or nothing to compare)
    reached: bool  # False: an earlier check refused, so the router never compared this one
    statement: str  # e.g. "gap to the next capability 0.057 < 0.15 (margin): refused by ..."


@dataclass  # no slots: orjson serializes slotted dataclasses ~3x slower
class RouteDecision:
    """The router's answer: the choice (or null), why, and every candidate it weighed.

    When the router will not guess (`margin`, `no_match`) and a generic agent takes the
    request instead, `rule` is `generic` and `refused_by` keeps the reason. For text,
    `margin` is the gap between the calibrated match confidences of the two best
    different capabilities, `text` explains the matching and `thresholds` states each
    threshold with the comparison that held.
    """

    capability: str | None
    agent_id: str | None
    rule: Rule
    candidates: list[Candidate]
    margin: float | None
    policy_version: str
    weights: dict[str, float]
    refused_by: Rule | None = None
    intent: dict[str, Any] | None = None  # what the intent parser agent did, when asked
    text: TextMatch | None = None
    negotiation: Negotiated | None = None  # when the candidates were asked for offers
    thresholds: list[ThresholdCheck] = field(default_factory=list)  # text only


@dataclass  # no slots: orjson serializes slotted dataclasses ~3x slower
class RankedCandidate:
    """One capability of `ranked` (text only): the caller may invoke it, the router's
    calibrated confidence in it (0 when the router did not weigh it), its similarity to
    the text when the semantic index ranked it, and what its card says."""

    capability: str
    confidence: float
    similarity: float | None
    description: str
    # each property's type (its enum values when it has them) and the required ones
    input_schema: dict[str, Any] | None


@dataclass  # no slots: orjson serializes slotted dataclasses ~3x slower
class RankedRouteDecision(RouteDecision):
    """`POST /v1/route`'s answer as the SDK reads it: the decision, and for text the
    `top_k` capabilities the caller may invoke that fit it best, best first, whatever
    the decision (None when the request named its capability)."""

    ranked: list[RankedCandidate] | None = None
