"""Calibrating the matchers on the catalog in force: each matcher's fit and its trials on
held-out texts (the packaged reference set's among them), and the map those trials give
for a set of matchers (`routing/calibration.py` has the method)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import structlog

from agent_reach.routing.calibration import (
    Calibration,
    Trial,
    fit_calibration,
    identity,
    join_trials,
    trial_of,
    without,
)
from agent_reach.routing.catalog import CapabilityCard
from agent_reach.routing.matchers.blending import blend
from agent_reach.routing.matchers.protocol import Matcher, normalize_text
from agent_reach.routing.reference import reference_set

log = structlog.get_logger("agent_reach.routing")

# The packaged reference set (routing/reference): out of scope on every catalog, and the
# guard of the embedding matcher's gate.
REFERENCE = tuple(r.text for r in reference_set())
CatalogKey = tuple[int, int]  # registered cards version, learned examples version


@dataclass(slots=True)
class Fitted:
    """One catalog version's fit of one matcher and, for calibrated ones, its trials."""

    key: CatalogKey
    trials: list[tuple[list[Any], list[dict[str, float]]]] | None  # held-out texts, scores
    # reference texts the matcher found like a card of this catalog: not out of scope here
    like_a_card: frozenset[str] = frozenset()


def fit_and_try(
    matcher: Matcher,
    catalog: dict[str, CapabilityCard],
    folds: Sequence[Any],
    background: Sequence[str] = REFERENCE,
) -> list[tuple[list[Any], list[dict[str, float]]]] | None:
    """Fit the matcher (swapped in at once) with the background (the whole reference set
    by default), then score each fold's held-out texts with a trial fit of the rest; None
    for a matcher that is not calibrated."""
    matcher.fit(catalog, background)
    trials = []
    for fold in folds:
        scorer = matcher.trial(fold.catalog, fold.background)
        if scorer is None:
            return None
        texts = [normalize_text(h.text) for h in fold.held_out]
        trials.append((fold.held_out, scorer.score_many(texts)))
    return trials


def like_a_card(matcher: Matcher) -> frozenset[str]:
    found: frozenset[str] = getattr(matcher, "like_a_card", frozenset())
    return found


def calibrate(names: tuple[str, ...], fits: Sequence[Fitted]) -> Calibration:
    """Blend the held-out scores of `names` (`fits[i]` is names[i]'s fit) fold by fold,
    then fit the map."""
    per_matcher = [f.trials or [] for f in fits]
    on_topic = frozenset().union(*(f.like_a_card for f in fits))
    trials: list[Trial] = []
    held: list[Any] = []
    for fold in zip(*per_matcher, strict=True):
        # a remote encoder's folds hold no reference text (they come last in every fold):
        # the blend keeps the texts every matcher scored
        n = min(len(held_out) for held_out, _ in fold)
        held_out = fold[0][0][:n]
        blended = [
            {m.capability: m.confidence for m in blend(dict(zip(names, row, strict=True)))}
            for row in zip(*(scores[:n] for _, scores in fold), strict=True)
        ]
        trials.append(trial_of(held_out, blended))
        held += held_out
    if not trials:
        return identity(names)
    trial = join_trials(trials)
    # a reference text on a card's topic is no out-of-scope text for this catalog
    keep = np.array([not (h.reference and h.text in on_topic) for h in held], dtype=bool)
    calibration = fit_calibration(names, without(trial, keep))
    log.info(
        "routing_calibrated",
        matchers=list(names),
        slope=round(calibration.slope, 3),
        intercept=round(calibration.intercept, 3),
        in_scope=calibration.in_scope_texts,
        out_of_scope=calibration.out_of_scope_texts,
    )
    return calibration
