"""Fleet load in memory: the coordinators of one process (tests) share one table."""

from __future__ import annotations

from agent_reach.clock import Clock


class MemoryFleetLoadStore:
    """`FleetLoadStore` in memory: node -> (published at, counts)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._nodes: dict[str, tuple[float, dict[str, int]]] = {}

    async def exchange(
        self, node_id: str, counts: dict[str, int], stale_s: float
    ) -> dict[str, int]:
        now = self.clock.monotonic()
        self._nodes[node_id] = (now, dict(counts))
        totals: dict[str, int] = {}
        for node, (published, theirs) in list(self._nodes.items()):
            if published < now - stale_s:
                del self._nodes[node]
            elif node != node_id:
                for agent_id, count in theirs.items():
                    totals[agent_id] = totals.get(agent_id, 0) + count
        return totals
