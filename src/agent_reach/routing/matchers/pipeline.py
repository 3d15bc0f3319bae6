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

Nothing here blocks a request for long. Fits and calibrations run in a worker thread,
one catalog version after another; a matcher is used once it is fitted and its set is
calibrated, so a coordinator answers at once with the lexical matcher while the
sentence encoder loads, and every decision says which matchers were still pending.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from agent_reach.backends.memory.embeddings import MemoryEmbeddingStore
from agent_reach.backends.protocols import EmbeddingStore
from agent_reach.clock import Clock
from agent_reach.config import Settings
from agent_reach.errors import InvalidRequest
from agent_reach.model.decisions import TextMatch
from agent_reach.observability.metrics import Metrics
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.calibration import Calibration, folds_of, identity, without_reference
from agent_reach.routing.catalog import CapabilityCard, build_catalog
from agent_reach.routing.encoders.remote import EncoderUnavailable
from agent_reach.routing.encoders.spec import PACKAGED, EncoderSpec, encoder_spec
from agent_reach.routing.learned import NOTHING_LEARNED, LearnedSet
from agent_reach.routing.matchers.blending import (
    blend,
    blend_uncalibrated,
    strongest,
    uncalibrated_floor,
)
from agent_reach.routing.matchers.calibrating import (
    REFERENCE,
    CatalogKey,
    Fitted,
    calibrate,
    fit_and_try,
    like_a_card,
)
from agent_reach.routing.matchers.encoder_lifecycle import (
    EMBEDDING,
    REMOTE,
    RemoteEncoders,
    RemoteFit,
)
from agent_reach.routing.matchers.llm import LlmMatcher
from agent_reach.routing.matchers.protocol import NOBODY, Matcher, normalize_text
from agent_reach.routing.router import LEARNED, CapabilityMatch

log = structlog.get_logger("agent_reach.routing")

CACHE_SIZE = 10_000  # texts remembered; at ~1 KB each, about 10 MB
# A request waits this long for the first matcher's fit of a changed catalog (the lexical
# matcher refits in milliseconds); after it, the previous fit serves until the new lands.
REFIT_WAIT_S = 1.0
# A text that the careful floor of an uncalibrated catalog would refuse while a matcher is
# still fitting waits this long for it, once: well inside the 2 s `query` class.
PENDING_WAIT_S = 1.0
# ... and this long when the previous fit cannot serve (it was of an empty or tiny catalog,
# as at start; the encoder loads and encodes the reference set): an answer a moment later,
# not a no_match for a capability just registered.
FIRST_FIT_WAIT_S = 10.0
WATCH_S = 0.5  # a catalog change starts a refit within this long, text or no text
CalibrationKey = tuple[str, ...]

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
# Matchers that load a model (~150 MB, a second of CPU): loaded once some capability has a
# description or examples, so a catalog of bare tags (capability routing only) never pays.
LOADS_A_MODEL = frozenset({"embedding"})


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
        self._matchers: dict[str, Matcher] = {}
        self._fitted: dict[str, Fitted] = {}
        self._calibrations: dict[CalibrationKey, tuple[CatalogKey, Calibration]] = {}
        self._failed: dict[str, str] = {}  # matcher -> why it cannot be used
        self._deferred: set[str] = set()  # model matchers waiting for a card with text
        self._job: asyncio.Task[None] | None = None
        self._wanted: tuple[str, ...] = ()
        self._progress = asyncio.Event()
        self._generation = 0  # changes whenever a fit or calibration is swapped in
        self._catalog: tuple[CatalogKey, dict[str, CapabilityCard]] | None = None
        # (registry index version seen, cards version, the registered cards then)
        self._cards: tuple[int, int, dict[str, CapabilityCard]] | None = None
        self._cache: OrderedDict[str, tuple[float, Matched]] = OrderedDict()
        self._cache_key: tuple[int, int, str] | None = None
        self._encoders = RemoteEncoders(
            settings,
            clock,
            embeddings or MemoryEmbeddingStore(),
            self._calibrations,
            self._announce,
            self._progress,
            metrics,
        )

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
        await self._refresh(policy)
        now = self.clock.monotonic()
        key = (self._generation, learned.version, policy.version)
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
            first = any(n not in self._fitted for n in self._missing(matched))
            wait_s = FIRST_FIT_WAIT_S if first else PENDING_WAIT_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ready(policy), wait_s)
            matched = await self._match(normalized, policy, learned)
        if policy.match_cache_s > 0 and self._is_current() and self._cache_key == key:
            self._remember(normalized, matched, now + policy.match_cache_s)
        return matched

    def _refused_while_fitting(self, matched: Matched, policy: Policy) -> bool:
        """Below the careful floor of an uncalibrated catalog while a matcher is fitting;
        or, on a calibrated one, refused (threshold or margin) while a matcher of the
        policy has no fit in force yet (the lexical matcher's calibration answering
        alone)."""
        if not self._pending(policy):
            return False
        scores = [m.confidence for m in matched.matches[:2]] + [0.0, 0.0]
        if not matched.text.calibrated:
            return scores[0] < uncalibrated_floor(policy)
        refused = scores[0] < policy.min_confidence or scores[0] - scores[1] < policy.margin
        return refused and bool(self._missing(matched))

    def _missing(self, matched: Matched) -> list[str]:
        """The matchers the text went without that are still to be fitted (not failed)."""
        return [n for n in matched.text.pending if n not in self._failed.keys() | self._deferred]

    def _pending(self, policy: Policy) -> bool:
        """Whether a matcher of the policy is still to be fitted on this catalog."""
        return not self._is_ready(policy)

    def calibrations(self) -> dict[CalibrationKey, tuple[CatalogKey, Calibration]]:
        """Every calibration in force, by the matchers it calibrates, with its catalog key."""
        return dict(self._calibrations)

    def status(self, policy: Policy) -> dict[str, Any]:
        """Which matchers are ready, pending or failed, and whether the fits are current."""
        usable = self._usable(policy)
        return {
            "matchers": list(policy.matchers),
            "ready": list(usable),
            "pending": [m for m in policy.matchers if m not in usable and m not in self._failed],
            "waiting_for_text": sorted(self._deferred & set(policy.matchers)),
            "failed": dict(self._failed),
            "catalog_version": list(self._catalog_key()),
            "current": self._is_ready(policy),
            "encoder": self._encoders.status(policy, self._remote_usable(policy)),
        }

    def _is_ready(self, policy: Policy) -> bool:
        done = len(self._usable(policy)) + len(
            (self._failed.keys() | self._deferred) & set(policy.matchers)
        )
        return self._is_current() and done >= len(policy.matchers) and self._remote_ready(policy)

    async def ready(self, policy: Policy) -> None:
        """Wait until every matcher of the policy is fitted and calibrated on this catalog."""
        while True:
            await self._refresh(policy)
            if self._is_ready(policy):
                return
            self._progress.clear()
            await self._progress.wait()

    async def matcher(self, name: str, policy: Policy | None = None) -> Matcher:
        """The named matcher, fitted to the current catalog (benchmarks score with it)."""
        await self.ready(policy or Policy(matchers=[name]))
        if name in self._failed:
            raise InvalidRequest(self._failed[name])
        return self._matchers[name]

    def prepare(self, policy: Policy) -> None:
        """Start fitting now (the encoder loads), before the first text arrives."""
        if self._is_stale(policy):
            self._start(policy)

    async def watch(self, policy: Callable[[], Policy], every_s: float = WATCH_S) -> None:
        """Refit whenever the catalog or the encoder changes (a remote encoder that failed
        is probed, and refitted once it answers), without waiting for a text, until
        cancelled."""
        while True:
            await asyncio.sleep(every_s)
            await self._encoders.probe()
            self.prepare(policy())

    def llm(self) -> LlmMatcher | None:
        """The LLM matcher, when the policy asks it and it is configured."""
        matcher = self._matchers.get("llm")
        return matcher if isinstance(matcher, LlmMatcher) else None

    async def aclose(self) -> None:
        """Stop fitting and close matchers that hold clients or threads."""
        if self._job is not None:
            self._job.cancel()
            await asyncio.gather(self._job, return_exceptions=True)
        for matcher in self._matchers.values():
            close = getattr(matcher, "aclose", None)
            if close is not None:
                await close()
        await self._encoders.aclose()

    # -- matching ------------------------------------------------------------------------

    async def _match(self, text: str, policy: Policy, learned: LearnedSet) -> Matched:
        usable = self._usable(policy)
        calibrated_names = self._calibrated_names(policy)
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
                scores = await self._matchers[name].scores(text, not_mine)
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
        skipped = sorted(not_mine & self._catalog_at(self._catalog_key()).keys())
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
        usable = self._usable(policy)
        return TextMatch(
            matchers=asked,
            pending=[m for m in policy.matchers if m not in usable],
            calibrated=False,
            min_confidence=policy.min_confidence,
            margin=policy.margin,
            not_mine=not_mine,
        )

    def _usable(self, policy: Policy) -> list[str]:
        """The policy's matchers that can answer now: fitted, and calibrated when they are
        calibrated (a calibrated matcher is used only after every one before it)."""
        usable: list[str] = []
        prefix: tuple[str, ...] = ()
        current = self._catalog_key()
        for name in policy.matchers:
            fitted = self._fitted.get(name)
            if fitted is None:
                continue
            if fitted.trials is not None:
                found = self._calibrations.get((*prefix, name))
                # a calibration of an earlier catalog serves until the new one lands, unless
                # it could not be fitted or had no slope (the catalog was empty, tiny or of
                # description-only cards then: a new card is not weighed by the old fit)
                if found is None or not (found[1].sloped or found[0] == current):
                    continue
                prefix = (*prefix, name)
            usable.append(name)
        return usable

    def _calibrated_names(self, policy: Policy) -> set[str]:
        return {n for n in policy.matchers if (f := self._fitted.get(n)) and f.trials is not None}

    def _calibration_of(self, names: CalibrationKey) -> Calibration:
        found = self._calibrations.get(names)
        return found[1] if found is not None else identity(names)

    # -- fitting and calibrating, off the event loop -------------------------------------

    def _catalog_key(self) -> CatalogKey:
        return self._cards_version(), self.learned().examples_version

    def _cards_version(self) -> int:
        """Moves when the registered cards change: not when an instance only moves its
        endpoint, changes its weight, or joins or leaves with a card already known (a
        refit of the classifier costs seconds; a comparison of the cards, milliseconds
        once per registry change)."""
        seen = self._cards
        if seen is not None and seen[0] == self.index.version:
            return seen[1]
        cards = build_catalog(self.index)
        version = 0 if seen is None else seen[1] if seen[2] == cards else seen[1] + 1
        self._cards = (self.index.version, version, cards)
        return version

    def _is_current(self) -> bool:
        key = self._catalog_key()
        return not self._is_running() and all(f.key == key for f in self._fitted.values())

    def _is_running(self) -> bool:
        return self._job is not None and not self._job.done()

    def _start(self, policy: Policy) -> None:
        """Fit the policy's matchers to the catalog in the background, unless a fit is
        running."""
        if self._is_running():
            return
        self._wanted = wanted = tuple(policy.matchers)
        spec = encoder_spec(self.settings, policy) if EMBEDDING in wanted else None
        self._job = asyncio.create_task(self._fit_all(wanted, spec))
        self._job.add_done_callback(self._job_done)

    def _is_stale(self, policy: Policy) -> bool:
        key, wanted = self._catalog_key(), tuple(policy.matchers)
        return (
            wanted != self._wanted
            or any(
                self._fitted.get(n, _NEVER).key != key
                for n in wanted
                if n not in self._failed and n not in self._deferred
            )
            or not self._remote_ready(policy)
        )

    async def _refresh(self, policy: Policy) -> None:
        """Start a fit of a changed catalog; wait (briefly) for its first matcher."""
        wanted = tuple(policy.matchers)
        if self._is_stale(policy):
            self._start(policy)
        first = next((n for n in wanted if n not in self._failed), None)
        if first is None:
            return
        fitted = self._fitted.get(first)
        # a registration is waited for (briefly); learned examples are not: their own texts
        # route at once by the snapshot, and a stream of corrections must not stall requests
        if fitted is not None and fitted.key[0] == self._cards_version():
            return
        if fitted is None:  # never fitted: wait for it
            wait_s = None
        else:
            wait_s = REFIT_WAIT_S if first in self._usable(policy) else FIRST_FIT_WAIT_S
        try:
            await asyncio.wait_for(self._first_fitted(first, policy), wait_s)
        except TimeoutError:
            return

    async def _first_fitted(self, name: str, policy: Policy) -> None:
        while (f := self._fitted.get(name)) is None or f.key != self._catalog_key():
            if name in self._failed:
                return
            self._start(policy)
            self._progress.clear()
            await self._progress.wait()

    def _job_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("matcher_fit_failed", error=repr(task.exception()))
        self._announce()

    def _announce(self) -> None:
        self._generation += 1
        self._progress.set()

    async def _fit_all(self, wanted: tuple[str, ...], spec: EncoderSpec | None) -> None:
        """Fit every wanted matcher to the catalog, then calibrate, until nothing changed.
        A fit already done on this catalog (and calibrated after the same matchers) is
        kept. A remote encoder's fit follows the packaged encoder's, its fallback."""
        if spec is None and self._encoders.held():
            await self._encoders.drop()
        while True:
            key = self._catalog_key()
            catalog = self._catalog_at(key)
            folds = folds_of(catalog, reference=REFERENCE)
            has_text = any(card.descriptions or card.examples for card in catalog.values())
            prefix: list[str] = []
            for name in wanted:
                if name in self._failed:
                    continue
                if name in LOADS_A_MODEL and not has_text:
                    self._deferred.add(name)
                    continue
                self._deferred.discard(name)
                before = tuple(prefix)
                done = self._fitted.get(name)
                if done is not None and done.key == key and name in self._matchers:
                    if done.trials is not None:
                        if self._calibrations.get((*before, name), _NO_CALIBRATION)[0] == key:
                            prefix.append(name)
                        else:
                            done = None
                else:
                    done = None
                if done is None:
                    matcher = await self._create(name)
                    if matcher is None:
                        continue
                    trials = await asyncio.to_thread(fit_and_try, matcher, catalog, folds)
                    fitted = Fitted(key, trials, like_a_card(matcher))
                    if trials is not None:
                        prefix.append(name)
                        calibration = await asyncio.to_thread(
                            calibrate, tuple(prefix), self._fits(tuple(prefix), fitted)
                        )
                        self._calibrations[tuple(prefix)] = (key, calibration)
                    # the fit's record lands with its calibration, not before: a text that
                    # finds the fit current must find the matcher usable
                    self._fitted[name] = fitted
                    self._announce()
                if name == EMBEDDING and spec is not None:
                    # without the reference set: its cosine thresholds are the packaged
                    # encoder's, and its 784 texts would cost the service as many encodes
                    await self._encoders.fit(
                        spec,
                        key,
                        catalog,
                        without_reference(folds),
                        [self._fitted[n] for n in before],
                        (*before, REMOTE),
                    )
            if self._catalog_key() == key:
                return

    async def _create(self, name: str) -> Matcher | None:
        matcher = self._matchers.get(name)
        if matcher is not None:
            return matcher
        factory = MATCHERS.get(name)
        try:
            if factory is None:
                raise InvalidRequest(f"unknown matcher {name!r}: use one of {sorted(MATCHERS)}")
            matcher = await asyncio.to_thread(factory, self.settings)  # may load a model
        except InvalidRequest as exc:
            self._failed[name] = exc.message
            log.error("matcher_unavailable", matcher=name, error=exc.message)
            self._announce()
            return None
        self._matchers[name] = matcher
        return matcher

    def _remote_ready(self, policy: Policy) -> bool:
        """False while the remote encoder asked for is still to be fitted on this catalog
        (`RemoteEncoders.ready`); true when the embedding matcher is not used at all."""
        if EMBEDDING not in policy.matchers or EMBEDDING in self._failed.keys() | self._deferred:
            return True
        return self._encoders.ready(policy, self._catalog_key())

    def _remote_usable(self, policy: Policy) -> RemoteFit | None:
        before = self._before_embedding(policy) if EMBEDDING in policy.matchers else ()
        return self._encoders.usable(policy, before, self._catalog_key())

    async def _embed_and_score(
        self,
        text: str,
        policy: Policy,
        before: CalibrationKey,
        without: frozenset[str] = NOBODY,
    ) -> tuple[dict[str, float], str]:
        """The embedding matcher's scores and which encoder gave them: the remote one when
        it can answer, else (it failed just now, or is down) the packaged one."""
        remote = self._encoders.usable(policy, before, self._catalog_key())
        if remote is not None:
            try:
                scores = await remote.matcher.scores(text, without)
            except EncoderUnavailable:
                pass  # marked down: this text and the next go to the packaged encoder
            else:
                return scores, self._encoders.served_by(remote.spec.label)
        scores = await self._matchers[EMBEDDING].scores(text, without)
        return scores, self._encoders.served_by(PACKAGED)

    def _before_embedding(self, policy: Policy) -> CalibrationKey:
        calibrated = self._calibrated_names(policy)
        names = policy.matchers[: policy.matchers.index(EMBEDDING)]
        return tuple(n for n in names if n in calibrated)

    def _fits(self, names: CalibrationKey, last: Fitted) -> list[Fitted]:
        """The fits of `names` in force, the last one's new fit (not yet swapped in)."""
        return [*(self._fitted[n] for n in names[:-1]), last]

    def _catalog_at(self, key: CatalogKey) -> dict[str, CapabilityCard]:
        if self._catalog is None or self._catalog[0] != key:
            self._catalog = (key, build_catalog(self.index, self.learned().by_capability))
        return self._catalog[1]

    def _remember(self, text: str, matched: Matched, expires: float) -> None:
        self._cache[text] = (expires, matched)
        self._cache.move_to_end(text)
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)


_NEVER = Fitted((-1, -1), None)
_NO_CALIBRATION: tuple[Any, Any] = (None, None)
