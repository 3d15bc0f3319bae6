"""The seams between the areas and the state they share: one protocol per concern.

Each method's docstring is its contract: what is atomic, what expires and when.
Implementations raise `StoreUnavailable` (never a driver error) when they cannot answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from agent_reach.model.agents import AgentSpec

OFFLINE_RETENTION_S = 600.0  # an instance whose lease ran out stays listed as offline this long


@dataclass(frozen=True, slots=True)
class InstanceRecord:
    """What the registry stores for one instance: its spec and when it first registered."""

    spec: AgentSpec
    registered_at: float


@dataclass(frozen=True, slots=True)
class LeasedRecord:
    """A stored record and what is left of its lease (0 when it has run out)."""

    record: InstanceRecord
    lease_left_s: float


@dataclass(frozen=True, slots=True)
class RegistryEvent:
    """A change made by some coordinator; `lease_left_s` is set for `put` and `renew`."""

    op: Literal["put", "renew", "remove"]
    agent_id: str
    origin: str
    record: InstanceRecord | None = None
    lease_left_s: float = 0.0


RegistryListener = Callable[[RegistryEvent], Awaitable[None] | None]


class RegistryStore(Protocol):
    """Registered instances and their leases."""

    async def put(self, record: InstanceRecord, origin: str) -> None:
        """Store or replace the record and start a fresh lease of ``spec.ttl`` seconds.

        Atomic: record, lease and listing change together. The record itself is kept
        `OFFLINE_RETENTION_S` past the end of its lease, so listings can show it offline.
        """

    async def renew(self, agent_id: str, origin: str) -> float | None:
        """Extend a live lease by its ttl and return the ttl in seconds.

        Returns None, changing nothing, when the id is unknown or its lease has run
        out (the agent must register again). Atomic check-and-extend.
        """

    async def remove(self, agent_id: str, origin: str) -> bool:
        """Delete record and lease at once; False when there was nothing to delete."""

    async def load(self) -> list[LeasedRecord]:
        """Every retained record with what is left of its lease, in one consistent read."""

    async def watch(self, listener: RegistryListener) -> None:
        """Call `listener` for every change any coordinator makes, until cancelled.

        Changes made before the call are not replayed: call `load` after `watch` has
        started to get a complete view. Returns at once when the store is not shared.
        """
