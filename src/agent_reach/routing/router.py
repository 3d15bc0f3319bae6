"""The router: matched capabilities + the registry index -> one explained decision.

Pure: it reads the in-memory index and the policy it is given, never a store or a
socket, and it never raises for "nothing fits" — the decision says why instead.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from agent_reach.model.decisions import Candidate, RouteDecision, Rule
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.policy import RoutingPolicy
from agent_reach.routing.scoring import factors_of, weighted_score

MAX_EXPLAINED = 20  # candidates listed in a decision; the rest are scored but not shown
TIE_EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class CapabilityMatch:
    """How well a capability fits the request, with each matcher's own score."""

    capability: str
    confidence: float
    scores: dict[str, float] = field(default_factory=dict)


def exact_match(capability: str) -> list[CapabilityMatch]:
    """The request named its capability: a full-confidence match on that tag alone."""
    return [CapabilityMatch(capability, 1.0, {"exact": 1.0})]


def decide(
    matches: list[CapabilityMatch],
    index: RegistryIndex,
    policy: RoutingPolicy,
    *,
    now: float,
    warm_agents: frozenset[str] = frozenset(),
    rule: Rule = "exact",
) -> RouteDecision:
    """Score every live instance of every matched capability and pick the best."""
    weights = policy.effective_weights
    candidates: list[Candidate] = []
    for match in matches:
        for instance in index.instances_of(match.capability):
            if not instance.is_live(now):
                continue
            factors = factors_of(
                instance, match=match.confidence, is_warm=instance.id in warm_agents
            )
            score = weighted_score(factors, weights, instance.spec.weight)
            candidates.append(
                Candidate(match.capability, instance.id, round(score, 6), factors, match.scores)
            )
    if not candidates:
        known = any(index.instances_of(m.capability) for m in matches)
        return _empty(policy, weights, "no_instance" if known else "no_match")
    candidates.sort(key=_by_score, reverse=True)
    best = candidates[0]
    ties = [c for c in candidates if best.score - c.score <= TIE_EPSILON]
    chosen = random.choice(ties) if len(ties) > 1 else best
    return RouteDecision(
        capability=chosen.capability,
        agent_id=chosen.agent_id,
        rule=rule,
        candidates=candidates[:MAX_EXPLAINED],
        margin=_margin(candidates),
        policy_version=policy.version,
        weights=weights,
    )


def _by_score(candidate: Candidate) -> float:
    return candidate.score


def _margin(ranked: list[Candidate]) -> float | None:
    """Score gap between the best candidate and the best one of another capability."""
    best = ranked[0]
    for other in ranked[1:]:
        if other.capability != best.capability:
            return round(best.score - other.score, 6)
    return None


def _empty(policy: RoutingPolicy, weights: dict[str, float], rule: Rule) -> RouteDecision:
    return RouteDecision(None, None, rule, [], None, policy.version, weights)
