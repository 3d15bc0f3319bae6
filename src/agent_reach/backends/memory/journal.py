"""Capped journals (dead letters) in memory."""

from __future__ import annotations

from collections import deque


class MemoryJournalStore:
    """`JournalStore` as bounded deques, newest at the right."""

    def __init__(self) -> None:
        self._logs: dict[str, deque[bytes]] = {}

    async def append(self, name: str, payload: bytes, cap: int) -> None:
        log = self._logs.get(name)
        if log is None or log.maxlen != cap:
            log = self._logs[name] = deque(log or (), maxlen=cap)
        log.append(payload)

    async def recent(self, name: str, limit: int) -> list[bytes]:
        log = self._logs.get(name, deque())
        return [log[-i] for i in range(1, min(limit, len(log)) + 1)]

    async def count(self, name: str) -> int:
        return len(self._logs.get(name, ()))
