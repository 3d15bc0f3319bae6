"""The seam every text matcher implements, and the one text normalization they share."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Protocol

from agent_reach.routing.catalog import CapabilityCard

TOP_K = 10  # capabilities a matcher reports: the router needs the best two, people a few more
MIN_REPORTED = 1e-6  # below this a confidence rounds to 0 and is left out
_TAG_SEPARATORS = re.compile(r"[._-]+")


def normalize_text(text: str) -> str:
    """NFKC (full-width forms fold), lower case, runs of whitespace as one space."""
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def card_texts(card: CapabilityCard) -> tuple[str, ...]:
    """What a matcher learns a capability from: its tag as words, descriptions, examples."""
    tag = " ".join(_TAG_SEPARATORS.split(card.capability))
    texts = (tag, *card.descriptions, *card.examples)
    return tuple(dict.fromkeys(normalize_text(text) for text in texts if text.strip()))


class Scorer(Protocol):
    """A fit that is not in force: scores texts synchronously (calibration trials)."""

    def score_many(self, texts: list[str]) -> list[dict[str, float]]: ...


class Matcher(Protocol):
    """Scores user text against the capability catalog.

    `fit` is called (in a worker thread) whenever the catalog changed, and must swap its
    new state in at once, so that `scores` calls running meanwhile see the old fit or the
    new one, never a mix. `scores` receives normalized text and answers capability ->
    score in [0, 1] for the best few capabilities; an empty dict means "no opinion". An
    unrelated text should score near 0, a paraphrase of an example near 1; what a score
    means on a given catalog is then fitted by the self-calibration (`calibration.py`).
    """

    name: str

    def fit(self, catalog: Mapping[str, CapabilityCard]) -> None: ...

    def trial(self, catalog: Mapping[str, CapabilityCard]) -> Scorer | None:
        """A fit of `catalog` that leaves the one in force alone (worker thread), for the
        self-calibration; None for a matcher whose answers are not calibrated (an LLM)."""
        ...

    async def scores(self, text: str) -> dict[str, float]: ...
