"""Work queues in memory with the same delivery rules as Redis Streams consumer groups."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Collection
from dataclasses import dataclass

from agent_reach.backends.memory.expiring import ExpiringDict
from agent_reach.clock import Clock


@dataclass(slots=True)
class _Pending:
    payload: bytes
    consumer: str
    touched_at: float


class _Queue:
    def __init__(self) -> None:
        self.new: dict[str, bytes] = {}
        self.pending: dict[str, _Pending] = {}
        self.arrived = asyncio.Event()


class MemoryQueueStore:
    """`QueueStore` for one process: entries wait in `new`, then are pending until acked."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._queues: dict[str, _Queue] = {}
        self._ids = itertools.count(1)
        self._pushed_once: ExpiringDict[bool] = ExpiringDict(clock.monotonic)  # "queue\0once"

    def _queue(self, name: str) -> _Queue:
        queue = self._queues.get(name)
        if queue is None:
            queue = self._queues[name] = _Queue()
        return queue

    async def push(self, queue: str, payload: bytes) -> str:
        q = self._queue(queue)
        entry_id = f"{next(self._ids)}-0"
        q.new[entry_id] = payload
        q.arrived.set()
        return entry_id

    async def push_once(self, queue: str, payload: bytes, once: str, ttl_s: float) -> bool:
        marker = f"{queue}\0{once}"
        if self._pushed_once.get(marker) is not None:
            return False
        self._pushed_once.set(marker, True, ttl_s)
        await self.push(queue, payload)
        return True

    async def pull(
        self,
        queue: str,
        consumer: str,
        *,
        count: int,
        block_s: float,
        stale_s: float,
        dead: Collection[str] = (),
    ) -> list[tuple[str, bytes]]:
        q = self._queue(queue)
        q.arrived.clear()
        taken = self._take(q, consumer, count, stale_s, dead)
        if not taken and block_s > 0:
            try:
                await asyncio.wait_for(q.arrived.wait(), block_s)
            except TimeoutError:
                return []
            taken = self._take(q, consumer, count, stale_s, dead)
        return taken

    def _take(
        self, q: _Queue, consumer: str, count: int, stale_s: float, dead: Collection[str]
    ) -> list[tuple[str, bytes]]:
        now = self._clock.monotonic()
        taken: list[tuple[str, bytes]] = []
        for entry_id, entry in q.pending.items():
            if len(taken) >= count:
                return taken
            # XAUTOCLAIM: idle entries, whoever held them; and every entry of a dead holder
            if now - entry.touched_at >= stale_s or entry.consumer in dead:
                entry.consumer, entry.touched_at = consumer, now
                taken.append((entry_id, entry.payload))
        for entry_id in list(q.new)[: count - len(taken)]:
            payload = q.new.pop(entry_id)
            q.pending[entry_id] = _Pending(payload, consumer, now)
            taken.append((entry_id, payload))
        return taken

    async def touch(self, queue: str, consumer: str, entry_ids: list[str]) -> None:
        q = self._queue(queue)
        now = self._clock.monotonic()
        for entry_id in entry_ids:
            entry = q.pending.get(entry_id)
            if entry is not None and entry.consumer == consumer:
                entry.touched_at = now

    async def ack(self, queue: str, entry_id: str) -> None:
        q = self._queue(queue)
        q.pending.pop(entry_id, None)
        q.new.pop(entry_id, None)

    async def depth(self, queue: str) -> int:
        q = self._queue(queue)
        return len(q.new) + len(q.pending)
