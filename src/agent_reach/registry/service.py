"""The registry service: writes go to the store, reads come from the local index.

Every coordinator keeps a `RegistryIndex` in memory so routing never waits on a store.
On a shared store it follows other coordinators' changes through `watch` and reloads
everything every `resync_s` seconds to heal any event it missed.
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from agent_reach.backends.protocols import (
    InstanceRecord,
    LeasedRecord,
    RegistryEvent,
    RegistryStore,
)
from agent_reach.clock import Clock
from agent_reach.errors import StoreUnavailable, UnknownAgent
from agent_reach.model.agents import AgentSpec, InstanceStats, InstanceView
from agent_reach.model.quality import QualityView
from agent_reach.registry.index import Instance, RegistryIndex

log = structlog.get_logger("agent_reach.registry")

DEFAULT_RESYNC_S = 5.0  # a missed event on a shared store heals within this many seconds


class Registry:
    """Register, renew, deregister and list instances; owns the routing index."""

    def __init__(
        self,
        store: RegistryStore,
        clock: Clock,
        *,
        node_id: str,
        resync_s: float = DEFAULT_RESYNC_S,
        shared: bool = False,
    ) -> None:
        self.store = store
        self.shared = shared  # other coordinators write to the store too
        self.clock = clock
        self.node_id = node_id
        self.resync_s = resync_s
        self.index = RegistryIndex()
        self.changed = asyncio.Event()  # set when an instance may have become available
        self._tasks: list[asyncio.Task[None]] = []
        self._catching: asyncio.Future[None] | None = None
        self._reads = 0  # catch-up reads begun: the running one is number `_reads`
        self._loaded_version: int | None = None  # the store's version the index last read

    async def start(self) -> None:
        """Load the stored registry and start following changes."""
        self._tasks = [
            asyncio.create_task(self.store.watch(self._apply), name="registry-watch"),
            asyncio.create_task(self._resync_forever(), name="registry-resync"),
        ]
        with contextlib.suppress(StoreUnavailable):
            await self.resync()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def register(self, spec: AgentSpec, owner: str | None = None) -> Instance:
        """Store the instance and start its lease; a known id is replaced in place."""
        record = InstanceRecord(spec=spec, registered_at=self.clock.wall(), owner=owner)
        await self.store.put(record, self.node_id)
        instance = self.index.upsert(record, self.clock.monotonic() + spec.ttl)
        log.info("agent_registered", agent_id=spec.id, capabilities=spec.capabilities)
        self.availability_changed()
        return instance

    async def heartbeat(self, agent_id: str) -> float:
        """Renew the lease and return its ttl; `UnknownAgent` when it has run out."""
        ttl_s = await self.store.renew(agent_id, self.node_id)
        if ttl_s is None:
            raise UnknownAgent(f"no live registration for agent {agent_id!r}: register again")
        if agent_id not in self.index.by_id:
            await self.resync()
        self.index.renew(agent_id, self.clock.monotonic() + ttl_s)
        return ttl_s

    async def deregister(self, agent_id: str) -> None:
        """Remove the instance at once; `UnknownAgent` when there was none."""
        removed = await self.store.remove(agent_id, self.node_id)
        known = agent_id in self.index.by_id
        self.index.remove(agent_id)
        if not (removed or known):
            raise UnknownAgent(f"no agent {agent_id!r} is registered")
        log.info("agent_deregistered", agent_id=agent_id)

    async def resync(self) -> None:
        """Replace the index's records and leases with what the store holds now.

        A store holding nothing while this index still has instances with live leases
        has lost its data (Redis restarted empty): those are written back at once, so
        routing goes on and their agents' next heartbeats find them, rather than 404s
        and a re-registration of every agent at its next heartbeat.
        """
        version = await self.store.version()  # before the read: a write between them is news
        now = self.clock.monotonic()
        leased = await self.store.load()
        if not leased:
            leased = await self._restore(now)
        seen = set()
        for item in leased:
            seen.add(item.record.spec.id)
            self.index.upsert(item.record, now + item.lease_left_s)
        for agent_id in [i for i in self.index.by_id if i not in seen]:
            self.index.remove(agent_id)
        self._loaded_version = version

    async def catch_up(self) -> None:
        """Re-read the store now: on a shared store, an instance another coordinator has
        just stored may not have reached this index yet (its event is on the way), and a
        caller that registered through one coordinator must find it through any other.
        The read must begin after the call: a read already running when it came may
        have missed a write acknowledged just before, so the caller waits for it and
        then shares the next one with everyone else who came meanwhile. The store's
        version is read first: when nothing was stored or removed since the index last
        read it, there is nothing to re-read, so requests naming capabilities nobody
        registered cost one small read each, not the whole registry. Alone on its
        store, nothing to do."""
        if not self.shared:
            return
        arrived = self._reads
        while True:
            if self._catching is None:
                self._reads += 1
                self._catching = asyncio.ensure_future(self._catch_up())
            began_after = self._reads > arrived
            await asyncio.shield(self._catching)
            if began_after:
                return

    async def _catch_up(self) -> None:
        try:
            with contextlib.suppress(StoreUnavailable):
                if await self.store.version() != self._loaded_version:
                    await self.resync()
        finally:
            self._catching = None

    async def _restore(self, now: float) -> list[LeasedRecord]:
        live = [i for i in self.index.by_id.values() if i.lease_until > now]
        for instance in live:
            await self.store.put(instance.record, self.node_id)
        if live:
            log.warning("registry_restored", instances=len(live))
        return [LeasedRecord(i.record, i.spec.ttl) for i in live]

    def availability_changed(self) -> None:
        """Wake whoever waits for instances to come (back): the suspended-queue replayer."""
        self.changed.set()

    def views(self) -> list[InstanceView]:
        """Every known instance with its status and this coordinator's stats."""
        now = self.clock.monotonic()
        return [view_of(instance, now) for instance in self.index.by_id.values()]

    async def record_of(self, agent_id: str) -> InstanceRecord | None:
        """The instance's record, from the store when this coordinator has not seen it yet
        (an event still on its way): ownership checks must not depend on that timing."""
        instance = self.index.by_id.get(agent_id)
        return instance.record if instance is not None else await self.store.get(agent_id)

    def owner_of(self, agent_id: str) -> str | None:
        """The principal that registered the instance, as this coordinator knows it."""
        instance = self.index.by_id.get(agent_id)
        return instance.record.owner if instance is not None else None

    def get(self, agent_id: str) -> InstanceView:
        instance = self.index.by_id.get(agent_id)
        if instance is None:
            raise UnknownAgent(f"no agent {agent_id!r} is registered")
        return view_of(instance, self.clock.monotonic())

    def capabilities(self) -> dict[str, list[str]]:
        """Capability -> ids of its live instances (capabilities with none are kept, empty)."""
        now = self.clock.monotonic()
        return {
            tag: [i.id for i in instances if i.is_live(now)]
            for tag, instances in sorted(self.index.by_capability.items())
        }

    async def _apply(self, event: RegistryEvent) -> None:
        if event.op == "resync":
            with contextlib.suppress(StoreUnavailable):
                await self.resync()
            return
        if event.origin == self.node_id:
            return
        now = self.clock.monotonic()
        if event.op == "put" and event.record is not None:
            self.index.upsert(event.record, now + event.lease_left_s)
            self.availability_changed()
        elif event.op == "renew":
            self.index.renew(event.agent_id, now + event.lease_left_s)
        elif event.op == "remove":
            self.index.remove(event.agent_id)
        elif event.op == "health" and event.health is not None:
            instance = self.index.by_id.get(event.agent_id)
            if instance is not None:
                instance.tracker.adopt(event.health, now)
                if event.health == "healthy":
                    self.availability_changed()

    async def _resync_forever(self) -> None:
        while True:
            await asyncio.sleep(self.resync_s)
            try:
                await self.resync()
            except StoreUnavailable:
                log.warning("registry_resync_failed")


def view_of(instance: Instance, now: float) -> InstanceView:
    """The listing form of an instance."""
    spec, window = instance.spec, instance.stats
    return InstanceView(
        id=spec.id,
        display_name=spec.display_name,
        capabilities=spec.capabilities,
        domain=spec.domain,
        generic=spec.generic,
        idempotent=spec.idempotent,
        weight=spec.weight,
        timeout_class=spec.timeout_class,
        transport=spec.transport,
        status=instance.status(now),
        lease_expires_in_s=round(max(0.0, instance.lease_until - now), 3),
        registered_at=instance.record.registered_at,
        disabled=instance.disabled,
        quality=QualityView(
            factor=instance.outcomes.quality, outcomes=dict(instance.outcomes.counts)
        ),
        stats=InstanceStats(
            in_flight=window.in_flight,
            fleet_in_flight=window.in_flight + window.remote_in_flight,
            capacity=spec.capacity,
            load=min(1.0, window.in_flight / spec.capacity),
            calls=window.calls,
            success_rate=window.success_rate,
            latency_ms_p50=window.latency_ms(0.5),
            latency_ms_p90=window.latency_ms(0.9),
        ),
    )
