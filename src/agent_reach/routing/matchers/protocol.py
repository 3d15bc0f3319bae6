"""The seam every text matcher implements, and the one text normalization they share."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from agent_reach.routing.catalog import CapabilityCard

TOP_K = 10  # capabilities a matcher reports: the router needs the best two, people a few more
MIN_REPORTED = 1e-6  # below this a confidence rounds to 0 and is left out
_NAME_SEPARATORS = re.compile(r"[\s._\-/:]+")
# a lower-case letter or digit before an upper-case one, an acronym before a word:
# camelCase, HTTPServer (letters and digits stay together: mp3, ipv4)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
MAX_SCHEMA_DEPTH = 4  # nested objects read this deep
MAX_SCHEMA_TEXTS = 32  # texts taken from one schema (a huge schema does not drown the docs)


def normalize_text(text: str) -> str:
    """NFKC (full-width forms fold), lower case, runs of whitespace as one space."""
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def card_texts(card: CapabilityCard) -> tuple[str, ...]:
    """What a matcher learns a capability from: its name as words, descriptions, what its
    input schema says (property names as words, their descriptions, enum values), examples.
    A capability known only by its docs (a federated MCP tool) is routed by these."""
    texts = (name_words(card.capability), *card.descriptions, *schema_texts(card.input_schema))
    texts += card.examples
    return tuple(dict.fromkeys(normalize_text(text) for text in texts if text.strip()))


def name_words(name: str) -> str:
    """A tool or capability name as words: `get_weather`, `getWeather`, `weather.get`,
    `HTTPServer` -> "get weather", "get Weather", "weather get", "HTTP Server"."""
    spaced = _CAMEL.sub(" ", name)
    return " ".join(w for w in _NAME_SEPARATORS.split(spaced) if w)


def schema_texts(schema: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The input schema's words: each property's name and description (one text each),
    its enum values (one text), nested objects and array items included. A schema that
    cannot be read gives nothing, never an error: the card still has its name and docs."""
    out: list[str] = []

    def walk(node: Any, depth: int) -> None:
        if not isinstance(node, Mapping) or depth > MAX_SCHEMA_DEPTH:
            return
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            for name, prop in properties.items():
                words = name_words(str(name))
                described = prop.get("description") if isinstance(prop, Mapping) else None
                if isinstance(described, str) and described.strip():
                    words = f"{words}: {described}"
                out.append(words)
                walk(prop, depth + 1)
        enum = node.get("enum")
        if isinstance(enum, list):
            values = [str(v) for v in enum if isinstance(v, str | int | float)]
            if values:
                out.append(" ".join(values))
        walk(node.get("items"), depth + 1)

    walk(schema, 0)
    return tuple(out[:MAX_SCHEMA_TEXTS])


NOBODY: frozenset[str] = frozenset()  # no capability said "not mine"


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
    `without` are capabilities whose agents said "not mine" (421) to this text: the
    matcher scores the rest conditioned on "not them" (its own distribution over what is
    left, not a share of the old one divided up), and never lists them.
    """

    name: str

    def fit(self, catalog: Mapping[str, CapabilityCard], background: Sequence[str] = ()) -> None:
        """Fit `catalog`; `background` are texts that belong to none of its capabilities
        (the packaged reference set), for a matcher that guards its scores with them."""
        ...

    def trial(
        self, catalog: Mapping[str, CapabilityCard], background: Sequence[str] = ()
    ) -> Scorer | None:
        """A fit of `catalog` that leaves the one in force alone (worker thread), for the
        self-calibration; None for a matcher whose answers are not calibrated (an LLM)."""
        ...

    async def scores(
        self, text: str, without: frozenset[str] = frozenset()
    ) -> dict[str, float]: ...
