"""Routed texts and learned examples in memory: one coordinator's own learning."""

from __future__ import annotations

from dataclasses import dataclass

from agent_reach.backends.memory.expiring import ExpiringDict
from agent_reach.clock import Clock


@dataclass(slots=True)
class _Example:
    capability: str
    document: bytes
    expires_at: float
    added: int  # order of adds: the oldest of a capability goes first


class MemoryLearningStore:
    """`LearningStore` in dicts; each call is one critical section (no awaits inside)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._texts: ExpiringDict[bytes] = ExpiringDict(clock.monotonic)
        self._examples: dict[str, _Example] = {}
        self._version = 0

    async def put_text(self, request_id: str, document: bytes, ttl_s: float) -> None:
        self._texts.set(request_id, document, ttl_s)

    async def get_text(self, request_id: str) -> bytes | None:
        return self._texts.get(request_id)

    async def add_example(
        self, example_id: str, capability: str, document: bytes, *, ttl_s: float, keep: int
    ) -> None:
        self._purge()
        self._version += 1
        self._examples.pop(example_id, None)
        self._examples[example_id] = _Example(
            capability, document, self._clock.monotonic() + ttl_s, self._version
        )
        same = [(e.added, i) for i, e in self._examples.items() if e.capability == capability]
        for _, oldest in sorted(same)[: max(0, len(same) - keep)]:
            del self._examples[oldest]

    async def examples(self) -> list[bytes]:
        self._purge()
        return [e.document for e in self._examples.values()]

    async def delete_example(self, example_id: str) -> bool:
        if self._examples.pop(example_id, None) is None:
            return False
        self._version += 1
        return True

    async def version(self) -> int:
        return self._version

    def _purge(self) -> None:
        now = self._clock.monotonic()
        for dead in [i for i, e in self._examples.items() if e.expires_at <= now]:
            del self._examples[dead]
