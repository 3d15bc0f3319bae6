"""The learned examples in force: a snapshot the matching pipeline reads, built from the store.

A positive example (a correction) routes its exact text to its capability at once and
joins that capability's examples at the next fit; a negative one (a 421 "not mine")
keeps its exact text from going to that capability first again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from agent_reach.model.feedback import LearnedExample
from agent_reach.routing.matchers.protocol import normalize_text


@dataclass(frozen=True, slots=True)
class LearnedSet:
    """Learned examples by normalized text and by capability; `version` names the content."""

    version: int = 0
    examples_version: int = 0  # changes only when the positive examples do: refit then
    positive: dict[str, LearnedExample] = field(default_factory=dict)
    negative: dict[str, frozenset[str]] = field(default_factory=dict)
    by_capability: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, examples: Iterable[LearnedExample], version: int, now: float) -> LearnedSet:
        """The unexpired examples; of two positives for the same text the newer wins."""
        live = sorted((e for e in examples if e.expires_at > now), key=lambda e: e.learned_at)
        positive: dict[str, LearnedExample] = {}
        negative: dict[str, set[str]] = {}
        for example in live:
            text = normalize_text(example.text)
            if example.kind == "positive":
                positive[text] = example
            else:
                negative.setdefault(text, set()).add(example.capability)
        by_capability: dict[str, list[str]] = {}
        for example in positive.values():
            by_capability.setdefault(example.capability, []).append(example.text)
        content = sorted((e.capability, e.text) for e in positive.values())
        return cls(
            version,
            hash(tuple(content)) if content else 0,
            positive,
            {text: frozenset(tags) for text, tags in negative.items()},
            {tag: tuple(texts) for tag, texts in by_capability.items()},
        )


NOTHING_LEARNED = LearnedSet()
