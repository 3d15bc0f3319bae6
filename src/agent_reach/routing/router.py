"""The router: matched capabilities + the registry index -> one explained decision.

Pure: it reads the in-memory index and the policy it is given, never a store or a
socket, and it never raises for "nothing fits" — the decision says why instead.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from agent_reach.model.decisions import Candidate, RouteDecision, Rule, TextMatch
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.explanation import threshold_checks
from agent_reach.routing.scoring import score_of

WeightsOf = Callable[[str], tuple[tuple[str, float], ...]]

_rng = random.Random()  # our own: callers seeding `random` do not steer ties

MAX_EXPLAINED = 20  # candidates listed in a decision; the rest are scored but not shown
TIE_EPSILON = 1e-9
LEARNED = "learned"  # the match score of a text learned from a correction: taken as it is


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
    policy: Policy,
    *,
    now: float,
    warm_agents: frozenset[str] = frozenset(),
    from_text: bool = False,
    text: TextMatch | None = None,
    weights_of: WeightsOf | None = None,
    allowed: Callable[[str], bool] | None = None,
) -> RouteDecision:
    """Score every live instance of every matched capability and pick the best.

    For text, `matches` are calibrated confidences, best first, and the capability is
    chosen on them: the router refuses to guess when the best is below the policy's
    `min_confidence` (`text.min_confidence` when given: higher on an uncalibrated catalog)
    (`no_match`) or the two best capabilities are closer than its
    `margin` (`margin`); a live generic agent then takes the request (`generic`), else the
    decision names nobody. Instance factors rank the instances of the chosen capability;
    they never turn a refusal into a guess. A text learned from a correction (`learned`)
    goes to its capability without thresholds. `weights_of` gives a capability's factor
    weights when they adapt to outcomes (else the policy's). `allowed`, when given, is
    the caller's right to invoke: a generic agent it refuses never takes the request.
    """
    decider = _Decider(index, policy, now, warm_agents, weights_of, allowed)
    if not from_text:
        return decider.decide_exact(matches)
    decision = decider.decide_text(matches, text)
    decision.text = text
    decision.thresholds = threshold_checks(
        matches[0].confidence if matches else None,
        _text_margin(matches),
        min_confidence=text.min_confidence if text else policy.min_confidence,
        margin=policy.margin,
        learned=bool(matches) and LEARNED in matches[0].scores,
    )
    return decision


@dataclass(slots=True)
class _Decider:
    index: RegistryIndex
    policy: Policy
    now: float
    warm_agents: frozenset[str]
    weights_of: WeightsOf | None = None
    allowed: Callable[[str], bool] | None = None

    def decide_exact(self, matches: list[CapabilityMatch]) -> RouteDecision:
        candidates = self.score(matches)
        if not candidates:
            known = any(self.index.instances_of(m.capability) for m in matches)
            return self.refuse("no_instance" if known else "no_match", [], False)
        return self.decision(_pick(candidates), "exact", candidates, _margin(candidates))

    def decide_text(self, matches: list[CapabilityMatch], text: TextMatch | None) -> RouteDecision:
        candidates = self.score(matches)
        rank = {m.capability: n for n, m in enumerate(matches)}
        candidates.sort(key=lambda c: (rank[c.capability], -c.score))
        gap = _text_margin(matches)
        if not matches:
            return self.refuse("no_match", candidates, True, gap)
        best = matches[0]
        if LEARNED not in best.scores:
            if best.confidence < (text.min_confidence if text else self.policy.min_confidence):
                return self.refuse("no_match", candidates, True, gap)
            if gap is not None and gap < self.policy.margin:
                return self.refuse("margin", candidates, True, gap)
        own = [c for c in candidates if c.capability == best.capability]
        if not own:
            known = bool(self.index.instances_of(best.capability))
            return self.refuse("no_instance" if known else "no_match", candidates, False, gap)
        rule: Rule = "learned" if LEARNED in best.scores else "best"
        return self.decision(_pick(own), rule, candidates, gap)

    def score(self, matches: list[CapabilityMatch]) -> list[Candidate]:
        """Every live instance of the matched capabilities, best first."""
        weights = self.policy.weight_items
        max_queue = self.policy.admission.max_queue
        candidates: list[Candidate] = []
        for match in matches:
            if self.weights_of is not None:
                weights = self.weights_of(match.capability)
            for instance in self.index.instances_of(match.capability):
                if not instance.is_live(self.now):
                    continue
                score, factors = score_of(
                    instance,
                    match=match.confidence,
                    is_warm=instance.id in self.warm_agents,
                    weights=weights,
                    default_max_queue=max_queue,
                )
                candidates.append(
                    Candidate(
                        match.capability,
                        instance.id,
                        round(score, 6),
                        factors,
                        match.scores,
                        outcomes=instance.outcomes.counts,
                    )
                )
        if len(candidates) > 1:
            candidates.sort(key=_by_score, reverse=True)
        return candidates

    def refuse(
        self,
        reason: Rule,
        candidates: list[Candidate],
        try_generic: bool,
        gap: float | None = None,
    ) -> RouteDecision:
        """No guess: the best live generic agent takes the request, or nobody does."""
        generic = self.generic_candidates() if try_generic else []
        if not generic:
            return self.decision(None, reason, candidates, gap)
        chosen = _pick(generic)
        decision = self.decision(chosen, "generic", [chosen, *candidates], gap)
        decision.refused_by = reason
        return decision

    def generic_candidates(self) -> list[Candidate]:
        generic = [i for i in self.index.generic if i.is_live(self.now)]
        tags = dict.fromkeys(i.spec.capabilities[0] for i in generic)
        if self.allowed is not None:
            tags = {tag: None for tag in tags if self.allowed(tag)}
        matches = [CapabilityMatch(tag, 1.0, {}) for tag in tags]
        ids = {i.id for i in generic}
        return [c for c in self.score(matches) if c.agent_id in ids]

    def decision(
        self,
        chosen: Candidate | None,
        rule: Rule,
        candidates: list[Candidate],
        margin: float | None,
    ) -> RouteDecision:
        return RouteDecision(
            capability=chosen.capability if chosen else None,
            agent_id=chosen.agent_id if chosen else None,
            rule=rule,
            candidates=candidates[:MAX_EXPLAINED],
            margin=margin,
            policy_version=self.policy.version,
            weights=(
                dict(self.weights_of(chosen.capability))
                if self.weights_of is not None and chosen is not None
                else self.policy.effective_weights
            ),
        )


def _by_score(candidate: Candidate) -> float:
    return candidate.score


def _pick(ranked: list[Candidate]) -> Candidate:
    """The best candidate; exact ties are shared at random so equal instances share load."""
    best = ranked[0]
    if len(ranked) == 1 or best.score - ranked[1].score > TIE_EPSILON:
        return best
    return _rng.choice([c for c in ranked if best.score - c.score <= TIE_EPSILON])


def _text_margin(matches: list[CapabilityMatch]) -> float | None:
    """Calibrated confidence gap between the two best (different) capabilities."""
    if len(matches) < 2:
        return None
    return round(matches[0].confidence - matches[1].confidence, 6)


def _margin(ranked: list[Candidate]) -> float | None:
    """Score gap between the best candidate and the best one of another capability."""
    best = ranked[0]
    for other in ranked[1:]:
        if other.capability != best.capability:
            return round(best.score - other.score, 6)
    return None
