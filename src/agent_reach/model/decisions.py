"""Routing decisions: the candidates with their factor scores, and what decided."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Rule = Literal["exact", "best", "margin", "no_match", "generic", "no_instance"]


@dataclass  # no slots: orjson serializes slotted dataclasses ~3x slower
class Candidate:
    """One instance considered for a capability, with each factor in [0, 1]."""

    capability: str
    agent_id: str
    score: float
    factors: dict[str, float]
    match: dict[str, float] = field(default_factory=dict)


@dataclass  # no slots: orjson serializes slotted dataclasses ~3x slower
class RouteDecision:
    """The router's answer: the choice (or null), why, and every candidate it weighed.

    When the router will not guess (`margin`, `no_match`) and a generic agent takes the
    request instead, `rule` is `generic` and `refused_by` keeps the reason.
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
