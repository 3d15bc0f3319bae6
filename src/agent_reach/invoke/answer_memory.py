"""Earlier answers by capability and payload, for the last stage of the fallback chain.

Only answers of capabilities declared `safe` are remembered and served
(`invoke/semantics.py`): a refund is never answered from memory.

Remembering is off the request path: answers wait in a bounded buffer that a
writer drains every `FLUSH_S` (no task wake-up per request), so a slow store never
slows a successful request; under overload the oldest are dropped. Answers over
`max_bytes` once encoded are not remembered (the store bounds the total).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import deque
from typing import Any

import orjson
import structlog

from agent_reach.backends.protocols import AnswerCache
from agent_reach.errors import StoreUnavailable
from agent_reach.invoke.semantics import may_answer_from_memory
from agent_reach.registry.index import RegistryIndex

log = structlog.get_logger("agent_reach.answers")

PENDING_MAX = 10_000  # answers waiting to be written; the oldest are dropped past this
FLUSH_S = 0.1  # answers are written within this long


def answer_key(capability: str, payload: Any) -> str:
    """The same capability with the same payload shares one remembered answer."""
    material = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    return f"{capability}:{hashlib.sha256(material).hexdigest()}"


class AnswerMemory:
    """Writes answers in the background; reads them when everything else failed."""

    def __init__(self, cache: AnswerCache, max_bytes: int, index: RegistryIndex) -> None:
        self.cache = cache
        self.max_bytes = max_bytes
        self.index = index
        self.skipped = 0  # answers too large to remember
        self._pending: deque[tuple[str, Any, Any, float]] = deque(maxlen=PENDING_MAX)

    def remember(self, capability: str, payload: Any, result: Any, ttl_s: float) -> None:
        """Buffer the answer for writing; never waits (the key and bytes are made later).
        The caller remembers only an answer of an instance that declared it safe."""
        self._pending.append((capability, payload, result, ttl_s))

    async def recall(self, capability: str, payload: Any) -> Any | None:
        """The last remembered answer, decoded, or None (always, unless the capability's
        registered instances all declare it safe)."""
        if not may_answer_from_memory(self.index, capability):
            return None
        raw = await self.cache.get(answer_key(capability, payload))
        return None if raw is None else orjson.loads(raw)

    async def run(self) -> None:
        """Write queued answers until cancelled."""
        while True:
            await asyncio.sleep(FLUSH_S)
            await self.flush()

    async def flush(self) -> None:
        """Write the answers queued so far: one write per key, the newest wins.

        Repeated payloads are common (the same question asked again); they are told
        apart by their plain encoding first, so each distinct one is keyed (its keys
        sorted, hashed) once per flush, not once per answer.
        """
        newest: dict[tuple[str, bytes], tuple[str, Any, Any, float]] = {}
        while self._pending:
            capability, payload, result, ttl_s = self._pending.popleft()
            seen = (capability, orjson.dumps(payload))
            newest.pop(seen, None)  # re-inserted last: the order of the answers is kept
            newest[seen] = (capability, payload, result, ttl_s)
        latest: dict[str, tuple[Any, float]] = {}
        for capability, payload, result, ttl_s in newest.values():
            latest[answer_key(capability, payload)] = (result, ttl_s)
        for key, (result, ttl_s) in latest.items():
            body = orjson.dumps(result)
            if len(body) > self.max_bytes:
                self.skipped += 1
                continue
            try:
                await self.cache.put(key, body, ttl_s)
            except StoreUnavailable:
                log.warning("answer_not_remembered")
                break
