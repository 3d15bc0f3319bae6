"""Coordinator liveness: each coordinator renews a short record in the shared store, and
reads back which coordinators stopped renewing theirs.

A claim (a caller's request id, a workflow step, a queued task or run) held by a
coordinator whose liveness ran out is taken over at once, not when its lease ends: the
lease covers the longest deadline, the liveness a few seconds. A live coordinator keeps
its claims however long its requests take.
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from agent_reach.backends.protocols import LivenessStore
from agent_reach.cancellation import honour_cancel
from agent_reach.clock import Clock
from agent_reach.errors import StoreUnavailable

log = structlog.get_logger("agent_reach.liveness")

BEATS_PER_TTL = 4  # a record is renewed this often within its ttl


class CoordinatorLiveness:
    """This coordinator's beat, and the coordinators seen dead at the latest beat."""

    def __init__(self, store: LivenessStore, node_id: str, ttl_s: float, clock: Clock) -> None:
        self.store = store
        self.node_id = node_id
        self.ttl_s = ttl_s
        self.clock = clock
        self.dead: frozenset[str] = frozenset()

    def is_dead(self, node: str) -> bool:
        """Whether `node` stopped renewing its record (as of the latest beat)."""
        return bool(node) and node != self.node_id and node in self.dead

    async def beat(self) -> None:
        """Renew this coordinator's record and refresh the view of the dead ones."""
        dead = await self.store.beat(self.node_id, self.ttl_s)
        for node in dead - self.dead:
            log.warning("coordinator_liveness_expired", node=node)
        self.dead = dead

    async def run(self) -> None:
        """Beat every `ttl_s / BEATS_PER_TTL` until cancelled; a store outage skips a beat."""
        while True:
            # A missed beat: the next one tries again; claims stay where they are meanwhile.
            with contextlib.suppress(StoreUnavailable):
                await self.beat()
            honour_cancel()
            await asyncio.sleep(self.ttl_s / BEATS_PER_TTL)
