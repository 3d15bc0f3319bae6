"""Idempotency records in memory; each operation is one critical section (no awaits inside).

Completed records are bounded by bytes as well as by their ttl: beyond the budget the
oldest answers are forgotten first (a repeat of such an id runs again), so a busy
process keeps a shorter replay window rather than growing without end. Records in
progress are never dropped.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import structlog

from agent_reach.backends.memory.expiring import ExpiringDict
from agent_reach.backends.protocols import Claim
from agent_reach.clock import Clock

# An in-progress record is kept past its lease so a late owner's `complete` is refused
# by fence, not by absence; completed records keep their own ttl.
TAKEOVER_GRACE_S = 3600.0
RECORD_OVERHEAD_BYTES = 256  # key, fingerprint and bookkeeping of one record, roughly

log = structlog.get_logger("agent_reach.idempotency")


@dataclass(slots=True)
class _Record:
    fingerprint: str
    fence: int
    lease_until: float
    status: int = 0
    body: bytes | None = None
    sent_to: list[str] = field(default_factory=list)
    node: str = ""


class MemoryIdempotencyStore:
    """`IdempotencyStore` for one process."""

    def __init__(self, clock: Clock, max_bytes: int) -> None:
        self._clock = clock
        self._records: ExpiringDict[_Record] = ExpiringDict(clock.monotonic)
        self._fences = 0
        self._max_bytes = max_bytes
        self._completed: OrderedDict[str, int] = OrderedDict()  # key -> bytes, oldest first
        self._bytes = 0
        self.forgotten = 0  # completed records dropped for the byte budget

    async def claim(
        self,
        key: str,
        fingerprint: str,
        lease_s: float,
        *,
        node: str = "",
        takeover_from: str | None = None,
    ) -> Claim:
        now = self._clock.monotonic()
        record = self._records.get(key)
        if record is not None:
            if record.fingerprint != fingerprint:
                return Claim("mismatch")
            if record.body is not None:
                return Claim("completed", record.fence, record.status, record.body)
            held = record.lease_until > now
            if held and not (takeover_from is not None and record.node == takeover_from):
                return Claim("in_progress", record.fence, node=record.node)
        self._fences += 1
        sent_to = record.sent_to if record is not None else []
        claimed = _Record(
            fingerprint, self._fences, now + lease_s, sent_to=list(sent_to), node=node
        )
        self._records.set(key, claimed, TAKEOVER_GRACE_S)
        return Claim("claimed", self._fences, sent_to=tuple(sent_to))

    async def note_sent(self, key: str, fence: int, agent_id: str) -> None:
        record = self._records.get(key)
        live = record is not None and record.fence == fence and record.body is None
        if live and record is not None and agent_id not in record.sent_to:
            record.sent_to.append(agent_id)

    async def complete(self, key: str, fence: int, status: int, body: bytes, ttl_s: float) -> bool:
        record = self._records.get(key)
        if record is None or record.fence != fence or record.body is not None:
            return False
        record.status, record.body = status, body
        self._records.set(key, record, ttl_s)
        self._account(key, len(body) + RECORD_OVERHEAD_BYTES)
        return True

    def _account(self, key: str, size: int) -> None:
        """Count a completed record, then forget the oldest ones beyond the budget."""
        self._bytes += size - self._completed.pop(key, 0)
        self._completed[key] = size
        while self._completed:
            oldest, oldest_size = next(iter(self._completed.items()))
            record = self._records.get(oldest)
            done = record is not None and record.body is not None
            if done and self._bytes <= self._max_bytes:
                return
            del self._completed[oldest]
            self._bytes -= oldest_size
            if done:  # over budget: the oldest answer goes (an expired one just leaves)
                self._records.pop(oldest)
                if self.forgotten == 0:
                    log.warning("idempotency_memory_full", max_bytes=self._max_bytes)
                self.forgotten += 1

    async def release(self, key: str, fence: int, *, forget: bool = False) -> None:
        record = self._records.get(key)
        if record is not None and record.fence == fence and record.body is None:
            if record.sent_to and not forget:
                record.lease_until = float("-inf")  # ended: the next claim takes it over
            else:
                self._records.pop(key)

    async def peek(self, key: str) -> Claim | None:
        record = self._records.get(key)
        if record is None:
            return None
        if record.body is not None:
            return Claim("completed", record.fence, record.status, record.body)
        if record.lease_until > self._clock.monotonic():
            return Claim("in_progress", record.fence, node=record.node)
        return None
