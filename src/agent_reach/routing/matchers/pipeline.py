"""The matching pipeline: the policy's matchers in order, a blend, calibration and a cache.

Matchers are asked cheapest first. The pipeline stops at the first one whose best score
reaches the policy's `confident_at[name]`; otherwise it asks the next. The raw answer is
the weighted mean of the scores of every matcher asked that had an opinion
(`BLEND_WEIGHTS`), mapped to a calibrated confidence by the self-calibration fitted for
exactly that set of matchers on the current catalog (`calibration.py`). On a catalog too
small to calibrate, the strongest matcher's score stands as it is, and the router is more
careful, not less: the best score must clear `min_confidence` by the `margin`
(`uncalibrated_floor`). Raw scores there are not confidences: on five capabilities with one
example each, "怎么办" ("what now?") scored 0.53 for the one whose example says "怎么还没到".
An LLM's answer is not calibrated: it is blended with the calibrated confidence.

Nothing here blocks a request for long. Fits and calibrations run in a worker thread
(`refitting.py`), one catalog version after another; a matcher is used once it is fitted
and its set is calibrated, so a coordinator answers at once with the lexical matcher
while the sentence encoder loads, and every decision says which matchers were still
pending.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_reach.backends.memory.embeddings import MemoryEmbeddingStore
from agent_reach.backends.protocols import EmbeddingStore
from agent_reach.clock import Clock
from agent_reach.config import Settings
from agent_reach.errors import InvalidRequest
from agent_reach.model.decisions import TextMatch
from agent_reach.observability.metrics import Metrics
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.calibration import Calibration, identity
from agent_reach.routing.encoders.remote import EncoderUnavailable
from agent_reach.routing.encoders.spec import PACKAGED
from agent_reach.routing.learned import NOTHING_LEARNED, LearnedSet
from agent_reach.routing.matchers.blending import (
    blend,
    blend_uncalibrated,
    strongest,
    uncalibrated_floor,
)
from agent_reach.routing.matchers.calibrating import CatalogKey
from agent_reach.routing.matchers.encoder_lifecycle import EMBEDDING, REMOTE, RemoteFit
from agent_reach.routing.matchers.llm import LlmMatcher
from agent_reach.routing.matchers.protocol import NOBODY, Matcher, normalize_text
from agent_reach.routing.matchers.refitting import (
    FIRST_FIT_WAIT_S,
    WATCH_S,
    CalibrationKey,
    Refits,
)
from agent_reach.routing.router import LEARNED, CapabilityMatch

CACHE_SIZE = 10_000  # texts remembered; at ~1 KB each, about 10 MB
# A text that the careful floor of an uncalibrated catalog would refuse while a matcher is
# still fitting waits this long for it, once: well inside the 2 s `query` class.
PENDING_WAIT_S = 1.0


@dataclass(frozen=True, slots=True)
class Matched:
    """The best capabilities for a text (calibrated, best first) and how they were found."""

    matches: list[CapabilityMatch]
    text: TextMatch


class MatchingPipeline:
    """Text -> the best few capabilities, each with every asked matcher's score."""

    def __init__(
        self,
        index: RegistryIndex,
        clock: Clock,
        settings: Settings,
        learned: Callable[[], LearnedSet] = lambda: NOTHING_LEARNED,
        *,
        embeddings: EmbeddingStore | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.index = index
        self.clock = clock
        self.settings = settings
        self.learned = learned
        self.metrics = metrics
        self._refits = Refits(
            index, clock, settings, learned, embeddings or MemoryEmbeddingStore(), metrics
        )
        self._encoders = self._refits.encoders
        self._cache: OrderedDict[str, tuple[float, Matched]] = OrderedDict()
        self._cache_key: tuple[int, int, str] | None = None

    async def match(self, text: str, policy: Policy) -> Matched:
        """The best capabilities for `text`; no matches when no matcher has an opinion."""
        normalized = normalize_text(text)
        learned = self.learned()
        example = learned.positive.get(normalized)
        if example is not None:
            match = CapabilityMatch(example.capability, 1.0, {LEARNED: 1.0})
            info = self._info(policy, [], [])
            info.learned = {"id": example.id, "capability": example.capability}
            return Matched([match], info)
        await self._refits.refresh(policy)
        now = self.clock.monotonic()
        key = (self._refits.generation, learned.version, policy.version)
        if key != self._cache_key:
            self._cache.clear()
            self._cache_key = key
        hit = self._cache.get(normalized)
        if hit is not None and hit[0] > now:
            return hit[1]
        matched = await self._match(normalized, policy, learned)
        if self._refused_while_fitting(matched, policy):
            # Refused while a stronger matcher is still fitting (the encoder of a catalog
            # just registered): the refusal is the fit's timing, not the text's. Wait for
            # it, briefly, once; longer while it was never fitted (the encoder loads).
            first = any(n not in self._refits.fitted for n in self._missing(matched))
            wait_s = FIRST_FIT_WAIT_S if first else PENDING_WAIT_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ready(policy), wait_s)
            matched = await self._match(normalized, policy, learned)
        if policy.match_cache_s > 0 and self._refits.is_current() and self._cache_key == key:
            self._remember(normalized, matched, now + policy.match_cache_s)
        return matched

    def _refused_while_fitting(self, matched: Matched, policy: Policy) -> bool:
        """Below the careful floor of an uncalibrated catalog while a matcher is fitting;
        or, on a calibrated one, refused (threshold or margin) while a matcher of the
        policy has no fit in force yet (the lexical matcher's calibration answering
        alone)."""
        if self._refits.is_ready(policy):
            return False
        scores = [m.confidence for m in matched.matches[:2]] + [0.0, 0.0]
        if not matched.text.calibrated:
            return scores[0] < uncalibrated_floor(policy)
        refused = scores[0] < policy.min_confidence or scores[0] - scores[1] < policy.margin
        return refused and bool(self._missing(matched))

    def _missing(self, matched: Matched) -> list[str]:
        """The matchers the text went without that are still to be fitted (not failed)."""
        done = self._refits.failed.keys() | self._refits.deferred
        return [n for n in matched.text.pending if n not in done]

    def calibrations(self) -> dict[CalibrationKey, tuple[CatalogKey, Calibration]]:
        """Every calibration in force, by the matchers it calibrates, with its catalog key."""
        return dict(self._refits.calibrations)

    def status(self, policy: Policy) -> dict[str, Any]:
        """Which matchers are ready, pending or failed, and whether the fits are current."""
        refits = self._refits
        usable = refits.usable(policy)
        return {
            "matchers": list(policy.matchers),
            "ready": list(usable),
            "pending": [m for m in policy.matchers if m not in usable and m not in refits.failed],
            "waiting_for_text": sorted(refits.deferred & set(policy.matchers)),
            "failed": dict(refits.failed),
            "catalog_version": list(refits.catalog_key()),
            "current": refits.is_ready(policy),
            "encoder": self._encoders.status(policy, self._remote_usable(policy)),
        }

    async def ready(self, policy: Policy) -> None:
        """Wait until every matcher of the policy is fitted and calibrated on this catalog."""
        await self._refits.ready(policy)

    async def matcher(self, name: str, policy: Policy | None = None) -> Matcher:
        """The named matcher, fitted to the current catalog (benchmarks score with it)."""
        await self.ready(policy or Policy(matchers=[name]))
        if name in self._refits.failed:
            raise InvalidRequest(self._refits.failed[name])
        return self._refits.matchers[name]

    def prepare(self, policy: Policy) -> None:
        """Start fitting now (the encoder loads), before the first text arrives."""
        self._refits.prepare(policy)

    async def watch(self, policy: Callable[[], Policy], every_s: float = WATCH_S) -> None:
        """Refit whenever the catalog or the encoder changes, without waiting for a text,
        until cancelled (`Refits.watch`)."""
        await self._refits.watch(policy, every_s)

    def llm(self) -> LlmMatcher | None:
        """The LLM matcher, when the policy asks it and it is configured."""
        matcher = self._refits.matchers.get("llm")
        return matcher if isinstance(matcher, LlmMatcher) else None

    async def aclose(self) -> None:
        """Stop fitting and close matchers that hold clients or threads."""
        await self._refits.aclose()

    # -- matching ------------------------------------------------------------------------

    async def _match(self, text: str, policy: Policy, learned: LearnedSet) -> Matched:
        refits = self._refits
        usable = refits.usable(policy)
        calibrated_names = refits.calibrated_names(policy)
        # capabilities whose agents answered 421 to this text: each matcher scores the rest
        # conditioned on "not them"; then calibrated and thresholded as any text
        not_mine = learned.negative.get(text, NOBODY)
        asked: dict[str, dict[str, float]] = {}
        encoder: str | None = None
        for name in usable:
            before = tuple(n for n in asked if n in calibrated_names)
            if name == EMBEDDING:
                scores, encoder = await self._embed_and_score(text, policy, before, not_mine)
            else:
                scores = await refits.matchers[name].scores(text, not_mine)
            asked[name] = scores
            threshold = policy.confident_at.get(name)
            if threshold is not None and scores and max(scores.values()) >= threshold:
                break
        calibrated = [n for n in asked if n in calibrated_names]
        served = [
            REMOTE if n == EMBEDDING and encoder not in (None, PACKAGED) else n for n in calibrated
        ]
        calibration = self._calibration_of(tuple(served))
        scored = {n: asked[n] for n in calibrated}
        raw = blend(scored) if calibration.fitted else strongest(scored)
        skipped = sorted(not_mine & refits.catalog_at(refits.catalog_key()).keys())
        mapped = calibration.confidences([m.confidence for m in raw])
        matches = [
            CapabilityMatch(m.capability, round(c, 6), {**m.scores, "raw": m.confidence})
            for m, c in zip(raw, mapped, strict=True)
        ]
        others = {n: s for n, s in asked.items() if n not in calibrated and s}
        if others:
            matches = blend_uncalibrated(matches, others)
        matches = [m for m in matches if m.capability not in not_mine]
        info = self._info(policy, list(asked), skipped)
        info.encoder = encoder
        info.calibrated = calibration.fitted
        if not calibration.fitted:
            info.min_confidence = uncalibrated_floor(policy)
        return Matched(matches, info)

    def _info(self, policy: Policy, asked: list[str], not_mine: list[str]) -> TextMatch:
        usable = self._refits.usable(policy)
        return TextMatch(
            matchers=asked,
            pending=[m for m in policy.matchers if m not in usable],
            calibrated=False,
            min_confidence=policy.min_confidence,
            margin=policy.margin,
            not_mine=not_mine,
        )

    def _calibration_of(self, names: CalibrationKey) -> Calibration:
        found = self._refits.calibrations.get(names)
        return found[1] if found is not None else identity(names)

    def _remote_usable(self, policy: Policy) -> RemoteFit | None:
        before = self._before_embedding(policy) if EMBEDDING in policy.matchers else ()
        return self._encoders.usable(policy, before, self._refits.catalog_key())

    async def _embed_and_score(
        self,
        text: str,
        policy: Policy,
        before: CalibrationKey,
        without: frozenset[str] = NOBODY,
    ) -> tuple[dict[str, float], str]:
        """The embedding matcher's scores and which encoder gave them: the remote one when
        it can answer, else (it failed just now, or is down) the packaged one."""
        remote = self._encoders.usable(policy, before, self._refits.catalog_key())
        if remote is not None:
            try:
                scores = await remote.matcher.scores(text, without)
            except EncoderUnavailable:
                pass  # marked down: this text and the next go to the packaged encoder
            else:
                return scores, self._encoders.served_by(remote.spec.label)
        scores = await self._refits.matchers[EMBEDDING].scores(text, without)
        return scores, self._encoders.served_by(PACKAGED)

    def _before_embedding(self, policy: Policy) -> CalibrationKey:
        calibrated = self._refits.calibrated_names(policy)
        names = policy.matchers[: policy.matchers.index(EMBEDDING)]
        return tuple(n for n in names if n in calibrated)

    def _remember(self, text: str, matched: Matched, expires: float) -> None:
        self._cache[text] = (expires, matched)
        self._cache.move_to_end(text)
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
