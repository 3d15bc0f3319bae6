"""Coordinator liveness records in memory: the coordinators of this one process.

A restart of the process starts empty; a coordinator restarted on a shared in-process
store (tests) comes back under a new node id, and its old one runs out like any other.
"""

from __future__ import annotations

from agent_reach.backends.protocols import LIVENESS_RETENTION_S
from agent_reach.clock import Clock


class MemoryLivenessStore:
    """`LivenessStore` for one process."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._until: dict[str, float] = {}  # node -> monotonic time its record runs out

    async def beat(self, node: str, ttl_s: float) -> frozenset[str]:
        now = self._clock.monotonic()
        self._until[node] = now + ttl_s
        for other, until in list(self._until.items()):
            if until + LIVENESS_RETENTION_S <= now:
                del self._until[other]
        return frozenset(other for other, until in self._until.items() if until <= now)
