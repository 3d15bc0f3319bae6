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
from agent_reach.routing.queueing import queue_scale
from agent_reach.routing.scoring import factors_of, weighted_score

_rng = random.Random()  # our own: callers seeding `random` do not steer ties

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
    from_text: bool = False,
) -> RouteDecision:
    """Score every live instance of every matched capability and pick the best.

    For text, the router refuses to guess when the best match is below the policy's
    `min_confidence` (`no_match`) or the two best candidates serve different
    capabilities and are closer than its `margin` (`margin`); a live generic agent
    then takes the request (`generic`), else the decision names nobody.
    """
    return _Decider(index, policy, now, warm_agents).decide(matches, from_text)


@dataclass(slots=True)
class _Decider:
    index: RegistryIndex
    policy: RoutingPolicy
    now: float
    warm_agents: frozenset[str]

    def decide(self, matches: list[CapabilityMatch], from_text: bool) -> RouteDecision:
        candidates = self.score(matches)
        if not candidates:
            known = any(self.index.instances_of(m.capability) for m in matches)
            return self.refuse("no_instance" if known else "no_match", [], from_text)
        if from_text:
            if max(m.confidence for m in matches) < self.policy.min_confidence:
                return self.refuse("no_match", candidates, True)
            margin = _margin(candidates)
            if margin is not None and margin < self.policy.margin:
                return self.refuse("margin", candidates, True)
        chosen = _pick(candidates)
        return self.decision(chosen, "best" if from_text else "exact", candidates)

    def score(self, matches: list[CapabilityMatch]) -> list[Candidate]:
        """Every live instance of the matched capabilities, best first."""
        weights = self.policy.weight_items
        candidates: list[Candidate] = []
        for match in matches:
            for instance in self.index.instances_of(match.capability):
                if not instance.is_live(self.now):
                    continue
                factors = factors_of(
                    instance, match=match.confidence, is_warm=instance.id in self.warm_agents
                )
                scale = queue_scale(instance, self.policy.admission.max_queue)
                score = weighted_score(factors, weights, instance.spec.weight * scale)
                candidates.append(
                    Candidate(match.capability, instance.id, round(score, 6), factors, match.scores)
                )
        if len(candidates) > 1:
            candidates.sort(key=_by_score, reverse=True)
        return candidates

    def refuse(self, reason: Rule, candidates: list[Candidate], try_generic: bool) -> RouteDecision:
        """No guess: the best live generic agent takes the request, or nobody does."""
        generic = self.generic_candidates() if try_generic else []
        if not generic:
            return self.decision(None, reason, candidates)
        chosen = _pick(generic)
        decision = self.decision(chosen, "generic", [chosen, *candidates])
        decision.margin = _margin(candidates) if candidates else None
        decision.refused_by = reason
        return decision

    def generic_candidates(self) -> list[Candidate]:
        generic = [i for i in self.index.generic if i.is_live(self.now)]
        tags = dict.fromkeys(i.spec.capabilities[0] for i in generic)
        matches = [CapabilityMatch(tag, 1.0, {}) for tag in tags]
        ids = {i.id for i in generic}
        return [c for c in self.score(matches) if c.agent_id in ids]

    def decision(
        self, chosen: Candidate | None, rule: Rule, candidates: list[Candidate]
    ) -> RouteDecision:
        return RouteDecision(
            capability=chosen.capability if chosen else None,
            agent_id=chosen.agent_id if chosen else None,
            rule=rule,
            candidates=candidates[:MAX_EXPLAINED],
            margin=_margin(candidates) if candidates else None,
            policy_version=self.policy.version,
            weights=self.policy.effective_weights,
        )


def _by_score(candidate: Candidate) -> float:
    return candidate.score


def _pick(ranked: list[Candidate]) -> Candidate:
    """The best candidate; exact ties are shared at random so equal instances share load."""
    best = ranked[0]
    if len(ranked) == 1 or best.score - ranked[1].score > TIE_EPSILON:
        return best
    return _rng.choice([c for c in ranked if best.score - c.score <= TIE_EPSILON])


def _margin(ranked: list[Candidate]) -> float | None:
    """Score gap between the best candidate and the best one of another capability."""
    best = ranked[0]
    for other in ranked[1:]:
        if other.capability != best.capability:
            return round(best.score - other.score, 6)
    return None
