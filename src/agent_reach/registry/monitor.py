"""Active probes and passive detection feeding each instance's health state machine.

Every instance with a live lease is probed at first sight (it stays `unknown` until a
probe or a delivery answers, so it is asked at once), then every `interval_s` (spread
out so probes do not arrive together); an offline instance is probed only when its
ejection pause ends (which doubles while it keeps failing), so a flapping instance
cannot return faster than the pause allows. Deliveries report their outcomes too. Each
state change is logged, counted, and announced to the other coordinators through the
registry store.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable

import structlog

from agent_reach.errors import StoreUnavailable
from agent_reach.model.agents import HealthStatus
from agent_reach.observability.metrics import Metrics
from agent_reach.registry.health import Source
from agent_reach.registry.index import Instance
from agent_reach.registry.service import Registry

_rng = random.Random()  # our own: callers seeding `random` do not steer probe spread

log = structlog.get_logger("agent_reach.health")

TICK_S = 0.05  # how often due probes are looked for: the granularity of re-probing
MAX_PARALLEL_PROBES = 64  # a registry of thousands is probed in waves, not all at once

Probe = Callable[[Instance], Awaitable[bool]]
PROBE_FAILED = "its health check failed (no 2xx answer within the probe timeout)"


class HealthMonitor:
    """Owns probing; `record_delivery` is the passive path, cheap enough for every request."""

    def __init__(
        self,
        registry: Registry,
        probe: Probe,
        metrics: Metrics,
        *,
        interval_s: float,
    ) -> None:
        self.registry = registry
        self.clock = registry.clock
        self.probe = probe
        self.metrics = metrics
        self.interval_s = interval_s
        self._next_probe: dict[str, float] = {}
        self._announcements: asyncio.Queue[tuple[str, HealthStatus]] = asyncio.Queue()
        self._probing: set[str] = set()
        self._slots = asyncio.Semaphore(MAX_PARALLEL_PROBES)
        self._wake = asyncio.Event()

    def record_delivery(self, instance: Instance, *, ok: bool, error: str | None = None) -> None:
        """Feed one delivery outcome (and the failure's `error`) into the instance's state."""
        instance.last_error = None if ok else error or instance.last_error
        before = instance.tracker.state
        after = instance.tracker.record(ok=ok, source="delivery", now=self.clock.monotonic())
        if after != before:
            self._changed(instance, before, after, "delivery")

    def probe_soon(self, agent_ids: list[str]) -> None:
        """Probe these instances at the next tick (e.g. after they failed a request)."""
        now = self.clock.monotonic()
        for agent_id in agent_ids:
            self._next_probe[agent_id] = now
        self._wake.set()

    async def run(self) -> None:
        """Probe forever; announce transitions; until cancelled."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self._announce_forever())
            while True:
                for instance in self._due():
                    self._probing.add(instance.id)
                    group.create_task(self._probe(instance))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), TICK_S)
                self._wake.clear()

    def _due(self) -> list[Instance]:
        now = self.clock.monotonic()
        due = []
        for instance in list(self.registry.index.by_id.values()):
            agent_id = instance.id
            if instance.lease_until <= now or agent_id in self._probing:
                continue
            at = self._next_probe.get(agent_id)
            if at is None:  # first sight: at once, it is `unknown` until a probe answers
                self._next_probe[agent_id] = now
                due.append(instance)
                continue
            reprobe = instance.tracker.reprobe_at
            if reprobe is not None:  # ejected: back only after its pause and a passing probe
                if reprobe <= now:
                    due.append(instance)
            elif at <= now:
                due.append(instance)
        for agent_id in [a for a in self._next_probe if a not in self.registry.index.by_id]:
            del self._next_probe[agent_id]
        return due

    async def _probe(self, instance: Instance) -> None:
        try:
            async with self._slots:
                sent_at = self.clock.monotonic()
                ok = await self.probe(instance)
        finally:
            self._probing.discard(instance.id)
        now = self.clock.monotonic()
        # After the first probe, a random point in the next interval: instances seen
        # together (a restart reading a whole registry) are not probed together forever.
        first = instance.tracker.state == "unknown" and not instance.tracker.failures
        pause = _rng.uniform(0, self.interval_s) if first else self.interval_s
        self._next_probe[instance.id] = now + pause
        self.metrics.probes.labels("pass" if ok else "fail").inc()
        instance.last_error = None if ok else PROBE_FAILED
        before = instance.tracker.state
        after = instance.tracker.record(ok=ok, source="probe", now=now, sent_at=sent_at)
        if after != before:
            self._changed(instance, before, after, "probe")

    def _changed(
        self, instance: Instance, before: HealthStatus, after: HealthStatus, source: Source
    ) -> None:
        log.info(
            f"instance_marked_{after}",
            agent_id=instance.id,
            previous=before,
            source=source,
            failures=instance.tracker.failures,
        )
        self.metrics.health_transitions.labels(after).inc()
        self._announcements.put_nowait((instance.id, after))
        if after == "healthy":
            # The failures that marked it would keep scoring it down for good (it gets no
            # traffic to outweigh them): coming back healthy means a clean window.
            instance.stats.forget()
            self.registry.availability_changed()

    async def _announce_forever(self) -> None:
        while True:
            agent_id, state = await self._announcements.get()
            try:
                await self.registry.store.announce_health(agent_id, state, self.registry.node_id)
            except StoreUnavailable:
                log.warning("health_announcement_lost", agent_id=agent_id, state=state)
