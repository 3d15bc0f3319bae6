"""The quality of an instance's work: its outcome counts and the Beta estimate over them.

Each outcome is evidence for or against the instance (`EVIDENCE`): a completed delivery
or a `good` rating for it; a failure, a timeout or a bounce against it; a declined offer
half against it (it did say so honestly); a `bad` rating twice (it cancels the
completion it rates, and counts as a failure). The estimate is the mean of the Beta
posterior, (good + prior_good) / (good + bad + prior_good + prior_bad), and the factor is
that mean relative to the prior's, capped at 1: an instance with no record and one whose
record is all good both score 1, and only evidence against an instance lowers it. A
quality score that starves shirkers, never newcomers: were good records rewarded above
the prior, whichever instance answered first would keep every sequential request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

OutcomeKind = Literal["completed", "failed", "timed_out", "bounced", "declined", "good", "bad"]
KINDS: tuple[OutcomeKind, ...] = (
    "completed",
    "failed",
    "timed_out",
    "bounced",
    "declined",
    "good",
    "bad",
)
# kind -> (evidence for, evidence against)
EVIDENCE: dict[str, tuple[float, float]] = {
    "completed": (1.0, 0.0),
    "good": (1.0, 0.0),
    "failed": (0.0, 1.0),
    "timed_out": (0.0, 1.0),
    "bounced": (0.0, 1.0),
    "declined": (0.0, 0.5),
    "bad": (0.0, 2.0),
}
DEFAULT_WINDOW_S = 3600.0  # issue 29: "an outcome ledger over a sliding hour"
DEFAULT_PRIOR_GOOD = 3.0  # Beta(3, 1): worth 4 outcomes, so a few bad ones move it at once
DEFAULT_PRIOR_BAD = 1.0


class QualityPolicy(BaseModel):
    """The policy's `[quality]` section: the ledger's window and the estimate's prior."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    window_s: float = Field(
        DEFAULT_WINDOW_S, ge=1, le=7 * 86_400, description="outcomes older than this are forgotten"
    )
    prior_good: float = Field(DEFAULT_PRIOR_GOOD, gt=0, le=1000)
    prior_bad: float = Field(DEFAULT_PRIOR_BAD, gt=0, le=1000)


@dataclass(frozen=True, slots=True)
class Outcomes:
    """An instance's outcome counts over the window, and its quality estimate (0-1)."""

    counts: Mapping[str, int]
    quality: float

    @classmethod
    def of(cls, counts: Mapping[str, int], policy: QualityPolicy) -> Outcomes:
        good = prior_good = policy.prior_good  # read once: a pydantic field read is slow
        bad = prior_bad = policy.prior_bad
        kept: dict[str, int] = {}
        for kind, n in counts.items():
            if n and kind in EVIDENCE:
                kept[kind] = n
        if len(kept) > 1:  # in KINDS' order (and summed in it)
            kept = {kind: kept[kind] for kind in KINDS if kind in kept}
        for kind, n in kept.items():
            plus, minus = EVIDENCE[kind]
            good += plus * n
            bad += minus * n
        prior_mean = prior_good / (prior_good + prior_bad)
        quality = min(1.0, good / (good + bad) / prior_mean)
        # round() formats and parses its float (~0.2 µs): not for the usual 1.0, kept as it is
        return cls(kept, quality if quality == 1.0 else round(quality, 4))


class QualityView(BaseModel):
    """An instance's quality as `GET /v1/agents` shows it: the factor and its counts."""

    factor: float
    outcomes: dict[str, int]


PRIOR = Outcomes.of({}, QualityPolicy())  # what an instance with no record starts with
