"""Task documents and cached answers in memory: JSON blobs with an expiry each."""

from __future__ import annotations

from agent_reach.backends.memory.expiring import ExpiringDict
from agent_reach.clock import Clock


class MemoryTaskStore:
    """`TaskStore` in a dict with per-task expiry."""

    def __init__(self, clock: Clock) -> None:
        self._tasks: ExpiringDict[bytes] = ExpiringDict(clock.monotonic)

    async def put(self, task_id: str, document: bytes, ttl_s: float) -> None:
        self._tasks.set(task_id, document, ttl_s)

    async def get(self, task_id: str) -> bytes | None:
        return self._tasks.get(task_id)


class MemoryAnswerCache:
    """`AnswerCache` in a dict with per-answer expiry."""

    def __init__(self, clock: Clock) -> None:
        self._answers: ExpiringDict[bytes] = ExpiringDict(clock.monotonic)

    async def put(self, key: str, body: bytes, ttl_s: float) -> None:
        self._answers.set(key, body, ttl_s)

    async def get(self, key: str) -> bytes | None:
        return self._answers.get(key)
