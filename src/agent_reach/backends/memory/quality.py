"""The outcome ledger in memory: counter buckets and served requests that expire."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from agent_reach.backends.memory.expiring import ExpiringDict
from agent_reach.clock import Clock


class MemoryQualityStore:
    """`QualityStore` in expiring dicts (one process: every coordinator is this one)."""

    def __init__(self, clock: Clock) -> None:
        self._buckets: ExpiringDict[Counter[str]] = ExpiringDict(clock.monotonic)
        self._served: ExpiringDict[bytes] = ExpiringDict(clock.monotonic)
        self._rated: ExpiringDict[bool] = ExpiringDict(clock.monotonic)

    async def add(self, series: str, bucket: int, counts: Mapping[str, int], ttl_s: float) -> None:
        key = f"{series}:{bucket}"
        found = self._buckets.get(key) or Counter()
        found.update(counts)
        self._buckets.set(key, found, ttl_s)

    async def totals(self, series: str, buckets: Sequence[int]) -> dict[str, int]:
        total: Counter[str] = Counter()
        for bucket in buckets:
            total.update(self._buckets.get(f"{series}:{bucket}") or {})
        return dict(total)

    async def put_served(self, records: Sequence[tuple[str, bytes]], ttl_s: float) -> None:
        self._served.set_many(records, ttl_s)

    async def served(self, request_id: str) -> bytes | None:
        return self._served.get(request_id)

    async def claim_rating(self, request_id: str, ttl_s: float) -> bool:
        if self._rated.get(request_id):
            return False
        self._rated.set(request_id, True, ttl_s)
        return True
