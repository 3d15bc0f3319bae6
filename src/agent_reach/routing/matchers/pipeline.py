"""The matching pipeline: the policy's matchers in order, a blend, and a TTL cache.

Matchers are asked cheapest first. The pipeline stops at the first one whose best
confidence reaches the policy's `confident_at[name]`; otherwise it asks the next. The
answer blends every matcher asked that had an opinion (a non-empty answer): a capability's
confidence is the weighted mean of their confidences (`BLEND_WEIGHTS`), so a stronger,
later matcher dominates and the lexical matcher's exact words still count. Each match
carries every asked matcher's own score, which `POST /v1/route` shows.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from agent_reach.clock import Clock
from agent_reach.config import Settings
from agent_reach.errors import InvalidRequest
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.catalog import CapabilityCard, build_catalog
from agent_reach.routing.matchers.protocol import Matcher, normalize_text
from agent_reach.routing.policy import RoutingPolicy
from agent_reach.routing.router import CapabilityMatch

MAX_MATCHES = 5  # capabilities handed to the router: enough for the margin rule and fallback
CACHE_SIZE = 10_000  # texts remembered; at ~1 KB each, about 10 MB
# A refit that takes longer than this is finished in the background while requests are
# served with the previous fit: registrations refit in milliseconds, 15,000 examples in
# seconds (bench/routing.py).
REFIT_WAIT_S = 1.0
# Blend weights. lexical 0.1 / embedding 0.9 had the best validation objective of 0, 0.1,
# 0.2, 0.35 and 0.5 on CLINC150 val and SMP2017 develop at k=100 and k=5 (bench/routing.py;
# within 0.004 of the best where it was not). An LLM's answer counts as much as both.
BLEND_WEIGHTS = {"lexical": 0.1, "embedding": 0.9, "llm": 1.0}
DEFAULT_BLEND_WEIGHT = 1.0

MatcherFactory = Callable[[Settings], Matcher]


def _lexical(settings: Settings) -> Matcher:
    from agent_reach.routing.matchers.lexical import LexicalMatcher

    return LexicalMatcher()


def _embedding(settings: Settings) -> Matcher:
    from agent_reach.routing.matchers.embedding import EmbeddingMatcher

    return EmbeddingMatcher()


def _llm(settings: Settings) -> Matcher:
    if not settings.llm_url:
        raise InvalidRequest("the policy asks the llm matcher: set AR_LLM_URL (and AR_LLM_MODEL)")
    from agent_reach.routing.matchers.llm import LlmMatcher

    return LlmMatcher(settings)


# Matcher name (as the policy's `matchers` lists it) -> factory; imported on first use.
MATCHERS: dict[str, MatcherFactory] = {"lexical": _lexical, "embedding": _embedding, "llm": _llm}


class MatchingPipeline:
    """Text -> the best few capabilities, each with every asked matcher's score."""

    def __init__(self, index: RegistryIndex, clock: Clock, settings: Settings) -> None:
        self.index = index
        self.clock = clock
        self.settings = settings
        self._matchers: dict[str, Matcher] = {}
        self._fitted: dict[str, int] = {}  # matcher -> index version of its current fit
        self._refits: dict[str, asyncio.Task[None]] = {}
        self._catalog: tuple[int, dict[str, CapabilityCard]] | None = None
        self._cache: OrderedDict[str, tuple[float, list[CapabilityMatch]]] = OrderedDict()
        self._cache_key: tuple[int, str] | None = None

    async def match(self, text: str, policy: RoutingPolicy) -> list[CapabilityMatch]:
        """The best capabilities for `text`, best first; [] when no matcher has an opinion."""
        normalized = normalize_text(text)
        now = self.clock.monotonic()
        key = self._key(policy)
        if key != self._cache_key:
            self._cache.clear()
            self._cache_key = key
        hit = self._cache.get(normalized)
        if hit is not None and hit[0] > now:
            return hit[1]
        matches, current = await self._match(normalized, policy)
        # only a fit of this very catalog is remembered (it may have changed while matching)
        if current and policy.match_cache_s > 0 and self._cache_key == key == self._key(policy):
            self._remember(normalized, matches, now + policy.match_cache_s)
        return matches

    async def matcher(self, name: str) -> Matcher:
        """The named matcher, fitted to the current catalog (benchmarks score with it)."""
        matcher, _ = await self._ready(name)
        return matcher

    async def aclose(self) -> None:
        """Stop refits and close matchers that hold clients or threads."""
        for task in self._refits.values():
            task.cancel()
        await asyncio.gather(*self._refits.values(), return_exceptions=True)
        for matcher in self._matchers.values():
            close = getattr(matcher, "aclose", None)
            if close is not None:
                await close()

    async def _match(self, text: str, policy: RoutingPolicy) -> tuple[list[CapabilityMatch], bool]:
        """The blended matches, and whether every matcher asked was fitted to this catalog."""
        asked: dict[str, dict[str, float]] = {}
        current = True
        for name in policy.matchers:
            matcher, fresh = await self._ready(name)
            current = current and fresh
            scores = await matcher.scores(text)
            asked[name] = scores
            threshold = policy.confident_at.get(name)
            if threshold is not None and scores and max(scores.values()) >= threshold:
                break
        return blend(asked), current

    async def _ready(self, name: str) -> tuple[Matcher, bool]:
        """The matcher, fitted to the current catalog if that takes under REFIT_WAIT_S."""
        matcher = self._matchers.get(name)
        if matcher is None:
            factory = MATCHERS.get(name)
            if factory is None:
                raise InvalidRequest(f"unknown matcher {name!r}: use one of {sorted(MATCHERS)}")
            matcher = self._matchers[name] = factory(self.settings)
        if self._fitted.get(name) == self.index.version:
            return matcher, True
        refit = self._refits.get(name)
        if refit is None:
            refit = self._refits[name] = asyncio.create_task(self._refit(name, matcher))
            refit.add_done_callback(lambda _: self._refits.pop(name, None))
        wait_s = REFIT_WAIT_S if name in self._fitted else None  # never fitted: wait for it
        try:
            await asyncio.wait_for(asyncio.shield(refit), wait_s)
        except TimeoutError:
            return matcher, False
        return matcher, self._fitted.get(name) == self.index.version

    async def _refit(self, name: str, matcher: Matcher) -> None:
        """Fit in a worker thread until the fit matches the index (it may change meanwhile)."""
        while self._fitted.get(name) != (version := self.index.version):
            await asyncio.to_thread(matcher.fit, self._catalog_at(version))
            self._fitted[name] = version

    def _catalog_at(self, version: int) -> dict[str, CapabilityCard]:
        if self._catalog is None or self._catalog[0] != version:
            self._catalog = (version, build_catalog(self.index))
        return self._catalog[1]

    def _key(self, policy: RoutingPolicy) -> tuple[int, str]:
        return self.index.version, policy.version

    def _remember(self, text: str, matches: list[CapabilityMatch], expires: float) -> None:
        self._cache[text] = (expires, matches)
        self._cache.move_to_end(text)
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)


def blend(asked: dict[str, dict[str, float]]) -> list[CapabilityMatch]:
    """Weighted mean of the confidences of the matchers that had an opinion; best first."""
    weights = {
        name: BLEND_WEIGHTS.get(name, DEFAULT_BLEND_WEIGHT) for name, s in asked.items() if s
    }
    total = sum(weights.values())
    if not total:
        return []
    confidence: dict[str, float] = {}
    for name, weight in weights.items():
        for capability, score in asked[name].items():
            confidence[capability] = confidence.get(capability, 0.0) + weight * score / total
    best = sorted(confidence.items(), key=_by_confidence, reverse=True)[:MAX_MATCHES]
    return [
        CapabilityMatch(tag, round(value, 6), {n: s.get(tag, 0.0) for n, s in asked.items()})
        for tag, value in best
    ]


def _by_confidence(item: tuple[str, float]) -> Any:
    return item[1], item[0]
