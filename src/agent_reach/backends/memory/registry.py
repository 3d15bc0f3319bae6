"""In-process stores for the embedded coordinator: one critical section per operation."""

from __future__ import annotations

from dataclasses import dataclass

from agent_reach.backends.protocols import (
    OFFLINE_RETENTION_S,
    InstanceRecord,
    LeasedRecord,
    RegistryListener,
)
from agent_reach.clock import SYSTEM_CLOCK, Clock
from agent_reach.model.agents import HealthStatus


@dataclass(slots=True)
class _Entry:
    record: InstanceRecord
    lease_until: float


class MemoryRegistryStore:
    """Registry records in a dict; leases are deadlines on the injected clock."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._version = 0

    async def put(self, record: InstanceRecord, origin: str) -> None:
        self._entries[record.spec.id] = _Entry(record, self._clock.monotonic() + record.spec.ttl)
        self._version += 1

    async def renew(self, agent_id: str, origin: str) -> float | None:
        entry = self._entries.get(agent_id)
        now = self._clock.monotonic()
        if entry is None or entry.lease_until <= now:
            return None
        entry.lease_until = now + entry.record.spec.ttl
        return entry.record.spec.ttl

    async def remove(self, agent_id: str, origin: str) -> bool:
        if self._entries.pop(agent_id, None) is None:
            return False
        self._version += 1
        return True

    async def version(self) -> int:
        return self._version

    async def get(self, agent_id: str) -> InstanceRecord | None:
        entry = self._entries.get(agent_id)
        return None if entry is None else entry.record

    async def load(self) -> list[LeasedRecord]:
        now = self._clock.monotonic()
        for agent_id in [
            i for i, e in self._entries.items() if e.lease_until + OFFLINE_RETENTION_S <= now
        ]:
            del self._entries[agent_id]
        return [
            LeasedRecord(e.record, max(0.0, e.lease_until - now)) for e in self._entries.values()
        ]

    async def announce_health(self, agent_id: str, health: HealthStatus, origin: str) -> None:
        """Nobody to tell: this store has a single coordinator."""

    async def watch(self, listener: RegistryListener) -> None:
        """Nothing to watch: this store has a single writer, the coordinator holding it."""
