"""Task documents, cached answers and key sets in memory: blobs with an expiry each."""

from __future__ import annotations

from collections import OrderedDict

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


class MemoryKeySetStore:
    """`KeySetStore` in a dict with per-document expiry."""

    def __init__(self, clock: Clock) -> None:
        self._documents: ExpiringDict[bytes] = ExpiringDict(clock.monotonic)

    async def put(self, name: str, document: bytes, ttl_s: float) -> None:
        self._documents.set(name, document, ttl_s)

    async def get(self, name: str) -> bytes | None:
        return self._documents.get(name)

    async def put_new(self, name: str, document: bytes, ttl_s: float) -> bytes:
        stored = self._documents.get(name)
        if stored is None:
            self._documents.set(name, document, ttl_s)
            return document
        return stored


class MemoryAnswerCache:
    """`AnswerCache` in a dict with per-answer expiry, at most `max_bytes` of answers:
    past that the least recently written go first (expired ones whenever met)."""

    def __init__(self, clock: Clock, max_bytes: int) -> None:
        self._now = clock.monotonic
        self.max_bytes = max_bytes
        self.size = 0  # bytes of the answers held
        self._answers: OrderedDict[str, tuple[float, bytes]] = OrderedDict()

    async def put(self, key: str, body: bytes, ttl_s: float) -> None:
        self._drop(key)
        if len(body) > self.max_bytes:
            return
        self._answers[key] = (self._now() + ttl_s, body)
        self.size += len(body)
        while self.size > self.max_bytes:
            self._drop(next(iter(self._answers)))

    async def get(self, key: str) -> bytes | None:
        entry = self._answers.get(key)
        if entry is None:
            return None
        if entry[0] <= self._now():
            self._drop(key)
            return None
        return entry[1]

    def _drop(self, key: str) -> None:
        entry = self._answers.pop(key, None)
        if entry is not None:
            self.size -= len(entry[1])
