"""The mesh's shared state in memory: disabled agents and chain budgets."""

from __future__ import annotations

from agent_reach.backends.memory.expiring import ExpiringDict
from agent_reach.clock import Clock


class MemoryMeshStore:
    """`MeshStore` in dicts (one process: every coordinator is this one)."""

    def __init__(self, clock: Clock) -> None:
        self._disabled: dict[str, bytes] = {}
        self._spent: ExpiringDict[float] = ExpiringDict(clock.monotonic)

    async def set_disabled(self, agent_id: str, record: bytes | None) -> bool:
        if record is None:
            return self._disabled.pop(agent_id, None) is not None
        changed = agent_id not in self._disabled
        self._disabled[agent_id] = record
        return changed

    async def disabled(self) -> dict[str, bytes]:
        return dict(self._disabled)

    async def spend(self, chain: str, amount: float, limit: float, ttl_s: float) -> float | None:
        total = (self._spent.get(chain) or 0.0) + amount
        if total > limit:
            return None
        self._spent.set(chain, total, ttl_s)
        return total
