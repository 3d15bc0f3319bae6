"""A dict whose entries expire; expired entries are dropped as writes go by.

A heap of deadlines finds the expired entries, so each write costs O(log n) however
many entries there are, and dead entries never pile up.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

V = TypeVar("V")


class ExpiringDict(Generic[V]):
    """key -> value with a deadline per entry on the given monotonic clock."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._entries: dict[str, tuple[float, int, V]] = {}
        self._deadlines: list[tuple[float, int, str]] = []  # may hold stale rows
        self._writes = itertools.count()

    def get(self, key: str) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= self._now():
            del self._entries[key]
            return None
        return entry[2]

    def set(self, key: str, value: V, ttl_s: float) -> None:
        now = self._now()
        self.sweep(now)
        write = next(self._writes)
        deadline = now + ttl_s
        self._entries[key] = (deadline, write, value)
        heapq.heappush(self._deadlines, (deadline, write, key))
        if len(self._deadlines) > 2 * len(self._entries) + 64:
            self._compact()

    def set_many(self, items: Iterable[tuple[str, V]], ttl_s: float) -> None:
        """`set` each (key, value), with one reading of the clock and one sweep for all."""
        now = self._now()
        self.sweep(now)
        deadline = now + ttl_s
        entries, deadlines, writes = self._entries, self._deadlines, self._writes
        for key, value in items:
            write = next(writes)
            entries[key] = (deadline, write, value)
            heapq.heappush(deadlines, (deadline, write, key))
        if len(deadlines) > 2 * len(entries) + 64:
            self._compact()

    def pop(self, key: str) -> None:
        self._entries.pop(key, None)

    def sweep(self, now: float | None = None) -> None:
        """Drop every entry whose deadline has passed."""
        now = self._now() if now is None else now
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= now:
            _, write, key = heapq.heappop(deadlines)
            entry = self._entries.get(key)
            if entry is not None and entry[1] == write:  # not rewritten since
                del self._entries[key]

    def _compact(self) -> None:
        """Rebuild the heap from the live entries (rewrites and pops leave stale rows)."""
        self._deadlines = [(d, w, k) for k, (d, w, _) in self._entries.items()]
        heapq.heapify(self._deadlines)

    def __len__(self) -> int:
        return len(self._entries)
