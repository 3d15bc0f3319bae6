"""A dict whose entries expire, swept a little on every write so memory stays bounded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")

SWEEP_EVERY = 256  # writes between sweeps: amortized O(1), and dead entries never pile up


class ExpiringDict(Generic[V]):
    """key -> value with a deadline per entry on the given monotonic clock."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._entries: dict[str, tuple[float, V]] = {}
        self._writes = 0

    def get(self, key: str) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= self._now():
            del self._entries[key]
            return None
        return entry[1]

    def set(self, key: str, value: V, ttl_s: float) -> None:
        self._entries[key] = (self._now() + ttl_s, value)
        self._writes += 1
        if self._writes % SWEEP_EVERY == 0:
            self.sweep()

    def pop(self, key: str) -> None:
        self._entries.pop(key, None)

    def sweep(self) -> None:
        """Drop every expired entry."""
        now = self._now()
        for key in [k for k, (deadline, _) in self._entries.items() if deadline <= now]:
            del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)
