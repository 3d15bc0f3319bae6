"""Workflow runs and saved definitions in memory."""

from __future__ import annotations

from collections import deque

from agent_reach.backends.memory.expiring import ExpiringDict
from agent_reach.clock import Clock


class MemoryRunStore:
    """`RunStore` in a dict with per-run expiry and a bounded list of the newest keys."""

    def __init__(self, clock: Clock) -> None:
        self._runs: ExpiringDict[bytes] = ExpiringDict(clock.monotonic)
        self._recent: deque[str] = deque()
        self._cancelled: ExpiringDict[bool] = ExpiringDict(clock.monotonic)

    async def create(self, key: str, record: bytes, ttl_s: float, *, keep_recent: int) -> bool:
        if self._runs.get(key) is not None:
            return False
        self._runs.set(key, record, ttl_s)
        self._recent.appendleft(key)
        while len(self._recent) > keep_recent:
            self._recent.pop()
        return True

    async def put(self, key: str, record: bytes, ttl_s: float) -> None:
        self._runs.set(key, record, ttl_s)

    async def get(self, key: str) -> bytes | None:
        return self._runs.get(key)

    async def recent(self, limit: int) -> list[str]:
        return list(self._recent)[: max(0, limit)]

    async def cancel(self, key: str, ttl_s: float) -> bool:
        if self._cancelled.get(key) is not None:
            return False
        self._cancelled.set(key, True, ttl_s)
        return True

    async def is_cancelled(self, key: str) -> bool:
        return self._cancelled.get(key) is not None


class MemoryWorkflowStore:
    """`WorkflowStore` in a dict."""

    def __init__(self) -> None:
        self._definitions: dict[str, bytes] = {}

    async def put(self, key: str, definition: bytes) -> None:
        self._definitions[key] = definition

    async def get(self, key: str) -> bytes | None:
        return self._definitions.get(key)
