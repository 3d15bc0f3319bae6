"""The packaged reference set: texts that belong to no business agent, and which of them
stand against a given catalog.

Several hundred each in Chinese and English, written for this project and versioned
(`offtopic-<VERSION>.<lang>.txt` beside this file): greetings, chit-chat, weather, jokes,
nonsense, other languages and requests from unrelated domains. They are the out-of-scope
side of every calibration, so a catalog of one description-only tool is calibrated as one
of 500 with examples, and the guard of the embedding matcher's gate (a text nearer one of
them than any card text of a capability is gated down), so that a learned example pulls
texts like itself but not chit-chat that merely shares its words.

A reference text that is like a registered card is left out for that catalog, and so is
a whole kind that is the catalog's topic (a weather tool makes the weather texts in
scope, even those less like its one line of docs than a paraphrase would be):
`unlike_cards`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

import numpy as np

from agent_reach.routing.matchers.protocol import normalize_text

VERSION = 1
LANGUAGES = ("zh", "en")
KINDS = frozenset(
    {"greeting", "chitchat", "weather", "joke", "nonsense", "other_language", "unrelated"}
)
# A reference text whose sentence-vector cosine with some card text reaches this is taken
# as that card's topic and left out. Paraphrases score 0.7-0.9 with the packaged encoder,
# texts of one topic 0.5-0.6, unrelated texts 0.1-0.3.
LIKE_A_CARD = 0.5
# A kind is the catalog's topic when its texts' median best cosine with the card texts
# stands this far above the median of the kinds' medians. With the packaged encoder the
# weather kind against a one-line weather tool: 0.36 against 0.17; no kind of three
# business desks (order tracking, stock and orders, a customer-service desk) above +0.08.
# On the tool benchmark's development half (bench/routing.py --mode tools --split dev;
# small catalogs / the big catalog, routed right and unfit refused): 0.06 63.6 / 89.0 %
# and 40.1 / 80.6 %, 0.09 63.2 / 90.1 and 38.9 / 80.6, 0.12 63.0 / 91.0 and 38.9 / 80.6,
# 0.16 62.2 / 91.4 and 38.2 / 80.6: within 1.5 points, so 0.12, clear of the desks' +0.08.
KIND_ABOVE = 0.12


@dataclass(frozen=True, slots=True)
class ReferenceText:
    text: str  # normalized as the matchers normalize
    kind: str
    language: str


@functools.cache
def reference_set() -> tuple[ReferenceText, ...]:
    """Every text of the packaged reference set, in file order."""
    out: list[ReferenceText] = []
    for language in LANGUAGES:
        name = f"offtopic-{VERSION}.{language}.txt"
        kind = ""
        for line in resources.files(__package__).joinpath(name).read_text("utf-8").splitlines():
            if line.startswith("#"):
                marker = line[1:].strip()
                kind = marker if marker in KINDS else kind
                continue
            if line.strip() and kind:
                out.append(ReferenceText(normalize_text(line), kind, language))
    return tuple(out)


def unlike_cards(
    background: np.ndarray, cards: np.ndarray, kinds: Sequence[str] | None = None
) -> np.ndarray:
    """Which background texts (rows of unit sentence vectors) are like no card text: their
    best cosine with `cards` is below LIKE_A_CARD, and their kind (`kinds[i]`, when given)
    is not the catalog's topic (KIND_ABOVE)."""
    if not len(cards) or not len(background):
        return np.ones(len(background), dtype=bool)
    best: np.ndarray = (background @ cards.T).max(axis=1)
    keep: np.ndarray = best < LIKE_A_CARD
    if kinds is not None:
        of = np.asarray(kinds)
        medians = {k: float(np.median(best[of == k])) for k in set(kinds)}
        typical = float(np.median(list(medians.values())))
        for kind, median in medians.items():
            if median >= typical + KIND_ABOVE:
                keep &= of != kind
    return keep


@functools.cache
def kind_of() -> dict[str, str]:
    """Each reference text's kind, by its text."""
    return {r.text: r.kind for r in reference_set()}
