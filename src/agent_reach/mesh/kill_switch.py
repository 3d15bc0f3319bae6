"""The kill switch: an admin takes an agent out of the mesh at once.

`POST /v1/agents/{id}/disable` records the agent in the shared `MeshStore`; every
coordinator reads that set every `REFRESH_S` (at once on the coordinator that changed
it) and applies it to its registry index, so a disabled instance is out of routing
everywhere within a second, stays out when it re-registers, and its delegation tokens
are refused. Requests already delivered to it finish.
"""

from __future__ import annotations

import asyncio
import contextlib

import orjson
import structlog

from agent_reach.backends.protocols import MeshStore
from agent_reach.cancellation import honour_cancel
from agent_reach.clock import Clock
from agent_reach.errors import StoreUnavailable
from agent_reach.registry.index import RegistryIndex

log = structlog.get_logger("agent_reach.mesh")

REFRESH_S = 0.5  # issue 29: every coordinator within a second


class KillSwitch:
    """The disabled agents, as this coordinator last read them."""

    def __init__(self, store: MeshStore, index: RegistryIndex, clock: Clock) -> None:
        self._store = store
        self._index = index
        self._clock = clock
        self.records: dict[str, dict[str, object]] = {}
        self._task: asyncio.Task[None] | None = None

    def is_disabled(self, agent_id: str) -> bool:
        return agent_id in self.records

    async def set(self, agent_id: str, *, disabled: bool, by: str) -> bool:
        """Disable or enable `agent_id`; whether it changed. Logged as an audit record."""
        record = orjson.dumps({"by": by, "at": self._clock.wall()}) if disabled else None
        changed = await self._store.set_disabled(agent_id, record)
        log.warning("agent_disabled" if disabled else "agent_enabled", agent_id=agent_id, by=by)
        await self.refresh()
        return changed

    async def refresh(self) -> None:
        """Read the shared set and apply it to routing."""
        found = await self._store.disabled()
        self.records = {agent_id: orjson.loads(record) for agent_id, record in found.items()}
        if frozenset(self.records) != self._index.disabled:
            self._index.disable(frozenset(self.records))

    async def start(self) -> None:
        with contextlib.suppress(StoreUnavailable):
            await self.refresh()
        self._task = asyncio.create_task(self._follow(), name="kill-switch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _follow(self) -> None:
        """Refresh every `REFRESH_S`; a store outage is logged once, and its end."""
        failing = False
        while True:
            await asyncio.sleep(REFRESH_S)
            try:
                await self.refresh()
            except StoreUnavailable:
                honour_cancel()
                if not failing:
                    log.warning("kill_switch_refresh_failed", held=sorted(self.records))
                failing = True
                continue
            if failing:
                log.info("kill_switch_refreshed")
            failing = False
