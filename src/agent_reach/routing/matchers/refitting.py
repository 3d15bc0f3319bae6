"""Refits: the policy's matchers fitted and calibrated on the catalog in force, off the
event loop.

One job at a time fits every matcher the policy asks (cheapest first) in a worker thread,
then calibrates it after the ones before it, and starts over while the catalog changed
meanwhile. A fit and its calibration land together; the previous ones serve until then.
A request waits briefly for the first matcher's fit of a changed catalog (the lexical
matcher refits in milliseconds), and `watch` starts a refit of a changed catalog or
encoder without waiting for a text. The matching pipeline reads what is in force here:
which matchers are usable, their fits and their calibrations.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from agent_reach.backends.protocols import EmbeddingStore
from agent_reach.clock import Clock
from agent_reach.config import Settings
from agent_reach.errors import InvalidRequest
from agent_reach.observability.metrics import Metrics
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.calibration import Calibration, folds_of, without_reference
from agent_reach.routing.catalog import CapabilityCard, build_catalog
from agent_reach.routing.encoders.spec import EncoderSpec, encoder_spec
from agent_reach.routing.learned import LearnedSet
from agent_reach.routing.matchers.calibrating import (
    REFERENCE,
    CatalogKey,
    Fitted,
    calibrate,
    fit_and_try,
    like_a_card,
)
from agent_reach.routing.matchers.encoder_lifecycle import EMBEDDING, REMOTE, RemoteEncoders
from agent_reach.routing.matchers.protocol import Matcher

log = structlog.get_logger("agent_reach.routing")

# A request waits this long for the first matcher's fit of a changed catalog (the lexical
# matcher refits in milliseconds); after it, the previous fit serves until the new lands.
REFIT_WAIT_S = 1.0
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


class Refits:
    """The matchers, their fits and calibrations in force, and the job that refits them."""

    def __init__(
        self,
        index: RegistryIndex,
        clock: Clock,
        settings: Settings,
        learned: Callable[[], LearnedSet],
        embeddings: EmbeddingStore,
        metrics: Metrics | None = None,
    ) -> None:
        self.index = index
        self.settings = settings
        self.learned = learned
        self.matchers: dict[str, Matcher] = {}
        self.fitted: dict[str, Fitted] = {}
        self.calibrations: dict[CalibrationKey, tuple[CatalogKey, Calibration]] = {}
        self.failed: dict[str, str] = {}  # matcher -> why it cannot be used
        self.deferred: set[str] = set()  # model matchers waiting for a card with text
        self.progress = asyncio.Event()
        self.generation = 0  # changes whenever a fit or calibration is swapped in
        self.encoders = RemoteEncoders(
            settings,
            clock,
            embeddings,
            self.calibrations,
            self._announce,
            self.progress,
            metrics,
        )
        self._job: asyncio.Task[None] | None = None
        self._wanted: tuple[str, ...] = ()
        self._catalog: tuple[CatalogKey, dict[str, CapabilityCard]] | None = None
        # (registry index version seen, cards version, the registered cards then)
        self._cards: tuple[int, int, dict[str, CapabilityCard]] | None = None

    # -- what is in force ----------------------------------------------------------------

    def usable(self, policy: Policy) -> list[str]:
        """The policy's matchers that can answer now: fitted, and calibrated when they are
        calibrated (a calibrated matcher is used only after every one before it)."""
        usable: list[str] = []
        prefix: tuple[str, ...] = ()
        current = self.catalog_key()
        for name in policy.matchers:
            fitted = self.fitted.get(name)
            if fitted is None:
                continue
            if fitted.trials is not None:
                found = self.calibrations.get((*prefix, name))
                # a calibration of an earlier catalog serves until the new one lands, unless
                # it could not be fitted or had no slope (the catalog was empty, tiny or of
                # description-only cards then: a new card is not weighed by the old fit)
                if found is None or not (found[1].sloped or found[0] == current):
                    continue
                prefix = (*prefix, name)
            usable.append(name)
        return usable

    def calibrated_names(self, policy: Policy) -> set[str]:
        return {n for n in policy.matchers if (f := self.fitted.get(n)) and f.trials is not None}

    def is_ready(self, policy: Policy) -> bool:
        """Every matcher of the policy fitted and calibrated on this catalog (or failed,
        or waiting for a card with text)."""
        done = len(self.usable(policy)) + len(
            (self.failed.keys() | self.deferred) & set(policy.matchers)
        )
        return self.is_current() and done >= len(policy.matchers) and self.remote_ready(policy)

    def is_current(self) -> bool:
        key = self.catalog_key()
        return not self._is_running() and all(f.key == key for f in self.fitted.values())

    def remote_ready(self, policy: Policy) -> bool:
        """False while the remote encoder asked for is still to be fitted on this catalog
        (`RemoteEncoders.ready`); true when the embedding matcher is not used at all."""
        if EMBEDDING not in policy.matchers or EMBEDDING in self.failed.keys() | self.deferred:
            return True
        return self.encoders.ready(policy, self.catalog_key())

    def catalog_key(self) -> CatalogKey:
        return self.cards_version(), self.learned().examples_version

    def cards_version(self) -> int:
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

    def catalog_at(self, key: CatalogKey) -> dict[str, CapabilityCard]:
        if self._catalog is None or self._catalog[0] != key:
            self._catalog = (key, build_catalog(self.index, self.learned().by_capability))
        return self._catalog[1]

    # -- starting and waiting ------------------------------------------------------------

    def prepare(self, policy: Policy) -> None:
        """Start a refit when the catalog, the policy's matchers or the encoder changed."""
        if self._is_stale(policy):
            self._start(policy)

    async def watch(self, policy: Callable[[], Policy], every_s: float = WATCH_S) -> None:
        """Refit whenever the catalog or the encoder changes (a remote encoder that failed
        is probed, and refitted once it answers), without waiting for a text, until
        cancelled."""
        while True:
            await asyncio.sleep(every_s)
            await self.encoders.probe()
            self.prepare(policy())

    async def ready(self, policy: Policy) -> None:
        """Wait until every matcher of the policy is fitted and calibrated on this catalog."""
        while True:
            await self.refresh(policy)
            if self.is_ready(policy):
                return
            self.progress.clear()
            await self.progress.wait()

    async def refresh(self, policy: Policy) -> None:
        """Start a fit of a changed catalog; wait (briefly) for its first matcher."""
        wanted = tuple(policy.matchers)
        self.prepare(policy)
        first = next((n for n in wanted if n not in self.failed), None)
        if first is None:
            return
        fitted = self.fitted.get(first)
        # a registration is waited for (briefly); learned examples are not: their own texts
        # route at once by the snapshot, and a stream of corrections must not stall requests
        if fitted is not None and fitted.key[0] == self.cards_version():
            return
        if fitted is None:  # never fitted: wait for it
            wait_s = None
        else:
            wait_s = REFIT_WAIT_S if first in self.usable(policy) else FIRST_FIT_WAIT_S
        try:
            await asyncio.wait_for(self._first_fitted(first, policy), wait_s)
        except TimeoutError:
            return

    async def aclose(self) -> None:
        """Stop fitting and close matchers that hold clients or threads."""
        if self._job is not None:
            self._job.cancel()
            await asyncio.gather(self._job, return_exceptions=True)
        for matcher in self.matchers.values():
            close = getattr(matcher, "aclose", None)
            if close is not None:
                await close()
        await self.encoders.aclose()

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
        key, wanted = self.catalog_key(), tuple(policy.matchers)
        return (
            wanted != self._wanted
            or any(
                self.fitted.get(n, _NEVER).key != key
                for n in wanted
                if n not in self.failed and n not in self.deferred
            )
            or not self.remote_ready(policy)
        )

    async def _first_fitted(self, name: str, policy: Policy) -> None:
        while (f := self.fitted.get(name)) is None or f.key != self.catalog_key():
            if name in self.failed:
                return
            self._start(policy)
            self.progress.clear()
            await self.progress.wait()

    def _job_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("matcher_fit_failed", error=repr(task.exception()))
        self._announce()

    def _announce(self) -> None:
        self.generation += 1
        self.progress.set()

    # -- the job, off the event loop -----------------------------------------------------

    async def _fit_all(self, wanted: tuple[str, ...], spec: EncoderSpec | None) -> None:
        """Fit every wanted matcher to the catalog, then calibrate, until nothing changed.
        A fit already done on this catalog (and calibrated after the same matchers) is
        kept. A remote encoder's fit follows the packaged encoder's, its fallback."""
        if spec is None and self.encoders.held():
            await self.encoders.drop()
        while True:
            key = self.catalog_key()
            catalog = self.catalog_at(key)
            folds = folds_of(catalog, reference=REFERENCE)
            has_text = any(card.descriptions or card.examples for card in catalog.values())
            prefix: list[str] = []
            for name in wanted:
                if name in self.failed:
                    continue
                if name in LOADS_A_MODEL and not has_text:
                    self.deferred.add(name)
                    continue
                self.deferred.discard(name)
                before = tuple(prefix)
                done = self.fitted.get(name)
                if done is not None and done.key == key and name in self.matchers:
                    if done.trials is not None:
                        if self.calibrations.get((*before, name), _NO_CALIBRATION)[0] == key:
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
                        self.calibrations[tuple(prefix)] = (key, calibration)
                    # the fit's record lands with its calibration, not before: a text that
                    # finds the fit current must find the matcher usable
                    self.fitted[name] = fitted
                    self._announce()
                if name == EMBEDDING and spec is not None:
                    # without the reference set: its cosine thresholds are the packaged
                    # encoder's, and its 784 texts would cost the service as many encodes
                    await self.encoders.fit(
                        spec,
                        key,
                        catalog,
                        without_reference(folds),
                        [self.fitted[n] for n in before],
                        (*before, REMOTE),
                    )
            if self.catalog_key() == key:
                return

    async def _create(self, name: str) -> Matcher | None:
        matcher = self.matchers.get(name)
        if matcher is not None:
            return matcher
        factory = MATCHERS.get(name)
        try:
            if factory is None:
                raise InvalidRequest(f"unknown matcher {name!r}: use one of {sorted(MATCHERS)}")
            matcher = await asyncio.to_thread(factory, self.settings)  # may load a model
        except InvalidRequest as exc:
            self.failed[name] = exc.message
            log.error("matcher_unavailable", matcher=name, error=exc.message)
            self._announce()
            return None
        self.matchers[name] = matcher
        return matcher

    def _fits(self, names: CalibrationKey, last: Fitted) -> list[Fitted]:
        """The fits of `names` in force, the last one's new fit (not yet swapped in)."""
        return [*(self.fitted[n] for n in names[:-1]), last]


_NEVER = Fitted((-1, -1), None)
_NO_CALIBRATION: tuple[Any, Any] = (None, None)
