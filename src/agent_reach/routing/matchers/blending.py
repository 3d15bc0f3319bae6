"""How the matchers' answers for one text become one list: the weighted blend of
calibrated matchers, the strongest score on a catalog too small to calibrate, and an
LLM's own confidence blended with the calibrated one."""

from __future__ import annotations

from typing import Any

from agent_reach.policy.policy import Policy
from agent_reach.routing.router import CapabilityMatch

MAX_MATCHES = 5  # capabilities handed to the router: enough for the margin rule and fallback
# Blend weights. The embedding classifier holds the lexical n-grams itself, so the lexical
# matcher's own score adds nothing once it has an opinion: lexical 0, 0.1 and 0.25 against
# embedding 0.9 gave, on CLINC150 val and SMP2017 develop at k = 3, 10, 30, the best
# figures at 0 (k=3: +2-3 points of in-scope accuracy). A matcher weighing 0 still answers
# alone while it is the only one with an opinion (the encoder loading). An LLM's answer
# counts as much as the rest.
BLEND_WEIGHTS = {"lexical": 0.0, "embedding": 0.9, "llm": 1.0}
DEFAULT_BLEND_WEIGHT = 1.0


def uncalibrated_floor(policy: Policy) -> float:
    """What the best raw score must reach on a catalog too small to calibrate: the policy's
    `min_confidence` plus its `margin`. Nothing says what a raw score is worth there, and
    a catalog of one capability has no runner-up for the margin rule to weigh it against
    (the classifier's probability is then 1 and the score is its gate alone), so the best
    must clear the threshold by the margin, as if "none of them" stood at the threshold."""
    return min(1.0, policy.min_confidence + policy.margin)


def blend(asked: dict[str, dict[str, float]]) -> list[CapabilityMatch]:
    """Weighted mean of the scores of the matchers that had an opinion; best first. When
    only matchers weighing 0 had one, their plain mean."""
    weights = {
        name: BLEND_WEIGHTS.get(name, DEFAULT_BLEND_WEIGHT) for name, s in asked.items() if s
    }
    total = sum(weights.values())
    if not weights:
        return []
    if not total:  # only matchers weighing 0 have an opinion: they count alike
        weights = dict.fromkeys(weights, 1.0)
        total = len(weights)
    confidence: dict[str, float] = {}
    for name, weight in weights.items():
        for capability, score in asked[name].items():
            confidence[capability] = confidence.get(capability, 0.0) + weight * score / total
    best = sorted(confidence.items(), key=_by_confidence, reverse=True)[:MAX_MATCHES]
    return [
        CapabilityMatch(tag, round(value, 6), {n: s.get(tag, 0.0) for n, s in asked.items()})
        for tag, value in best
    ]


def strongest(asked: dict[str, dict[str, float]]) -> list[CapabilityMatch]:
    """Each capability's best score from any matcher; best first. Used while the catalog
    is too small to calibrate: the blend's weights were chosen for calibrated scores, and
    a weighted mean of uncalibrated ones hides a matcher that is sure (a text that is
    nearly a card's own words scores ~1.0 lexically and far less by embedding)."""
    confidence: dict[str, float] = {}
    for scores in asked.values():
        for capability, score in scores.items():
            confidence[capability] = max(confidence.get(capability, 0.0), score)
    best = sorted(confidence.items(), key=_by_confidence, reverse=True)[:MAX_MATCHES]
    return [
        CapabilityMatch(tag, round(value, 6), {n: s.get(tag, 0.0) for n, s in asked.items()})
        for tag, value in best
    ]


def blend_uncalibrated(
    matches: list[CapabilityMatch], others: dict[str, dict[str, float]]
) -> list[CapabilityMatch]:
    """Calibrated confidences blended with matchers that give their own (an LLM)."""
    weights = {"calibrated": 1.0 if matches else 0.0}
    weights |= {n: BLEND_WEIGHTS.get(n, DEFAULT_BLEND_WEIGHT) for n in others}
    total = sum(weights.values())
    scores = {m.capability: dict(m.scores) for m in matches}
    confidence = {m.capability: weights["calibrated"] * m.confidence / total for m in matches}
    for name, answer in others.items():
        for tag, value in answer.items():
            confidence[tag] = confidence.get(tag, 0.0) + weights[name] * value / total
            scores.setdefault(tag, {})[name] = value
    best = sorted(confidence.items(), key=_by_confidence, reverse=True)[:MAX_MATCHES]
    return [CapabilityMatch(tag, round(v, 6), scores.get(tag, {})) for tag, v in best]


def _by_confidence(item: tuple[str, float]) -> Any:
    return item[1], item[0]
