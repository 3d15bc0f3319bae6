"""Token buckets in memory: one critical section per take."""

from __future__ import annotations

from agent_reach.clock import Clock


class MemoryQuotaStore:
    """`QuotaStore` for one process."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)

    async def take(self, key: str, rate_per_s: float, burst: int) -> float:
        now = self._clock.monotonic()
        tokens, at = self._buckets.get(key, (float(burst), now))
        tokens = min(float(burst), tokens + (now - at) * rate_per_s)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / rate_per_s
