"""Fleet load: every coordinator's in-flight count per instance, shared through the store.

Every `PUBLISH_S` the coordinator publishes its own counts and reads the others' in
one store call, off the request path; routing then reads the sum from memory. With
the store down, the others' counts are forgotten (local load still counts).
"""

from __future__ import annotations

import asyncio

import structlog

from agent_reach.backends.protocols import FleetLoadStore
from agent_reach.errors import StoreUnavailable
from agent_reach.registry.index import RegistryIndex

log = structlog.get_logger("agent_reach.fleet_load")

PUBLISH_S = 0.2  # issue 17: every 100-250 ms
STALE_S = 1.0  # five publications missed: that coordinator is gone, its load with it


class FleetLoad:
    """Publishes this coordinator's in-flight counts and adopts the fleet's."""

    def __init__(self, index: RegistryIndex, store: FleetLoadStore, node_id: str) -> None:
        self.index = index
        self.store = store
        self.node_id = node_id
        self._reachable = True

    async def exchange(self) -> None:
        """One round: publish, read, and set each instance's `remote_in_flight`."""
        mine = {
            agent_id: instance.stats.in_flight
            for agent_id, instance in self.index.by_id.items()
            if instance.stats.in_flight
        }
        try:
            theirs = await self.store.exchange(self.node_id, mine, STALE_S)
        except StoreUnavailable as exc:
            if self._reachable:  # said once per outage, not every round
                log.warning("fleet_load_unavailable", error=str(exc))
            self._reachable = False
            theirs = {}
        else:
            if not self._reachable:
                log.info("fleet_load_restored")
            self._reachable = True
        for agent_id, instance in self.index.by_id.items():
            instance.stats.remote_in_flight = theirs.get(agent_id, 0)

    async def run(self, interval_s: float = PUBLISH_S) -> None:
        """Exchange every `interval_s` until cancelled."""
        while True:
            await self.exchange()
            await asyncio.sleep(interval_s)
