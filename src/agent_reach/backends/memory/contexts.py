"""Contexts in memory: each operation is one critical section (no awaits inside).

A context keeps its document as the bytes it was written as (immutable, so reads may
share them) and sizes count the same as on Redis. Each appended list is a deque of
segments, oldest first; expiries only grow along it (a newer segment was written later,
and `hold` raises them all to the same floor), so expired segments are always at its head.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field

from agent_reach.backends.protocols import (
    ContextWrite,
    SegmentPolicy,
    StoredContext,
    Swept,
)
from agent_reach.clock import Clock

SWEEP_BATCH = 10_000  # contexts checked between two yields: ~6 ms of the event loop (measured)


@dataclass(slots=True, eq=False)
class _Segment:
    items: list[bytes]
    size: int
    expires_at: float


@dataclass(slots=True)
class _Context:
    document: bytes
    names: tuple[str, ...]  # a tuple: a few dozen bytes less per context than a frozenset
    version: int
    ttl_s: float
    expires_at: float
    access: bytes = b""
    lists: dict[str, deque[_Segment]] = field(default_factory=dict)

    def renew(self, now: float) -> None:
        self.expires_at = max(self.expires_at, now + self.ttl_s)

    def live_segments(self, name: str, now: float) -> deque[_Segment]:
        """The list's segments, after dropping the expired ones at its head."""
        segments = self.lists[name]
        _drop_expired(segments, now)
        return segments

    def drop_expired_segments(self, now: float) -> int:
        """Drop every expired segment; how many went."""
        return sum(_drop_expired(segments, now) for segments in self.lists.values())

    def segment_count(self) -> int:
        return sum(len(segments) for segments in self.lists.values())


class MemoryContextStore:
    """`ContextStore` for one process, timed by the injected clock."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._contexts: dict[str, _Context] = {}
        self._secret: bytes | None = None

    def _live(self, context_id: str, now: float) -> _Context | None:
        context = self._contexts.get(context_id)
        if context is not None and context.expires_at <= now:
            del self._contexts[context_id]
            return None
        return context

    async def create(
        self,
        context_id: str,
        document: bytes,
        names: Collection[str],
        ttl_s: float,
        access: bytes = b"",
    ) -> bool:
        now = self._clock.monotonic()
        if self._live(context_id, now) is not None:
            return False
        self._contexts[context_id] = _Context(
            _exact(document), tuple(names), 1, ttl_s, now + ttl_s, bytes(access)
        )
        return True

    async def access(self, context_id: str) -> bytes | None:
        context = self._live(context_id, self._clock.monotonic())
        return None if context is None else context.access

    async def read(self, context_id: str, lists: Collection[str] | None) -> StoredContext | None:
        now = self._clock.monotonic()
        context = self._live(context_id, now)
        if context is None:
            return None
        context.renew(now)
        wanted = context.lists.keys() if lists is None else context.lists.keys() & set(lists)
        loaded: dict[str, list[bytes]] = {}
        segments_read, bytes_read = 0, len(context.document)
        for name in wanted:
            segments = context.live_segments(name, now)
            loaded[name] = [item for segment in segments for item in segment.items]
            segments_read += len(segments)
            bytes_read += sum(segment.size for segment in segments)
        return StoredContext(
            document=context.document,
            version=context.version,
            expires_in_s=context.expires_at - now,
            lists=loaded,
            list_names=frozenset(context.lists),
            segments_read=segments_read,
            bytes_read=bytes_read,
        )

    async def write(
        self,
        context_id: str,
        document: bytes,
        names: Collection[str],
        *,
        version: int,
        drop_lists: Collection[str] = (),
    ) -> ContextWrite:
        now = self._clock.monotonic()
        context = self._live(context_id, now)
        if context is None:
            return ContextWrite("missing")
        if context.version != version:
            return ContextWrite("conflict", context.version)
        context.document, context.names = _exact(document), tuple(names)
        for name in drop_lists:
            context.lists.pop(name, None)
        return self._written(context, now)

    async def append(
        self,
        context_id: str,
        name: str,
        items: Sequence[bytes],
        *,
        version: int | None,
        policy: SegmentPolicy,
    ) -> ContextWrite:
        now = self._clock.monotonic()
        context = self._live(context_id, now)
        if context is None:
            return ContextWrite("missing")
        if version is not None and context.version != version:
            return ContextWrite("conflict", context.version)
        if name in context.names:
            return ContextWrite("not_a_list", context.version)
        segments = context.live_segments(name, now) if name in context.lists else deque()
        current = segments[-1] if segments else None
        plan = list(_fill(current, items, policy))
        opened = list({id(segment): segment for segment in plan if segment is not current}.values())
        context.drop_expired_segments(now)
        if context.segment_count() + len(opened) > policy.max_segments:
            return ContextWrite("too_many_segments", context.version)
        expires_at = now + context.ttl_s
        for segment, item in zip(plan, items, strict=True):
            segment.items.append(_exact(item))
            segment.size += len(item)
            segment.expires_at = max(segment.expires_at, expires_at)
        segments.extend(opened)
        context.lists[name] = segments
        return self._written(context, now)

    def _written(self, context: _Context, now: float) -> ContextWrite:
        context.version += 1
        context.renew(now)
        return ContextWrite("written", context.version, context.expires_at - now)

    async def delete(self, context_id: str) -> bool:
        if self._live(context_id, self._clock.monotonic()) is None:
            return False
        del self._contexts[context_id]
        return True

    async def hold(self, context_ids: Collection[str], hold_s: float) -> int:
        now = self._clock.monotonic()
        floor = now + hold_s
        held = 0
        for context_id in context_ids:
            context = self._live(context_id, now)
            if context is None:
                continue
            held += 1
            context.expires_at = max(context.expires_at, floor)
            for name in context.lists:
                for segment in context.live_segments(name, now):
                    segment.expires_at = max(segment.expires_at, floor)
        return held

    async def sweep(self) -> Swept:
        """Check every context, yielding to the event loop between batches."""
        contexts = segments = 0
        ids = list(self._contexts)
        for start in range(0, len(ids), SWEEP_BATCH):
            now = self._clock.monotonic()
            for context_id in ids[start : start + SWEEP_BATCH]:
                context = self._contexts.get(context_id)
                if context is None:
                    continue
                if context.expires_at <= now:
                    del self._contexts[context_id]
                    contexts += 1
                    segments += context.segment_count()
                elif context.lists:
                    segments += context.drop_expired_segments(now)
            await asyncio.sleep(0)
        return Swept(contexts, segments)

    async def shared_secret(self, candidate: bytes) -> bytes:
        if self._secret is None:
            self._secret = candidate
        return self._secret


def _drop_expired(segments: deque[_Segment], now: float) -> int:
    """Drop the expired segments at the head of a list (expiries only grow along it)."""
    dropped = 0
    while segments and segments[0].expires_at <= now:
        segments.popleft()
        dropped += 1
    return dropped


def _exact(blob: bytes) -> bytes:
    """A copy of exactly its size: orjson's output keeps a 4 KiB buffer behind a short
    result (measured: 4 KiB per 150-byte document), which a long-lived copy must not."""
    return memoryview(blob).tobytes()


def _fill(
    current: _Segment | None, items: Sequence[bytes], policy: SegmentPolicy
) -> Iterator[_Segment]:
    """The segment each item goes to: the current one while it has room, then new ones.

    Nothing is changed here; the caller applies the plan once it is accepted.
    """
    segment, count, size = current, 0, 0
    if current is not None:
        count, size = len(current.items), current.size
    for item in items:
        if (
            segment is None
            or count >= policy.items
            or (count and size + len(item) > policy.max_bytes)
        ):
            segment, count, size = _Segment([], 0, 0.0), 0, 0
        count += 1
        size += len(item)
        yield segment
