"""Earlier answers by capability and payload, for the last stage of the fallback chain.

Remembering is off the request path: answers go into a bounded queue that one
writer drains, so a slow store never slows a successful request (and under
overload the oldest wishes to remember are simply dropped).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from typing import Any

import orjson
import structlog

from agent_reach.backends.protocols import AnswerCache
from agent_reach.errors import StoreUnavailable

log = structlog.get_logger("agent_reach.answers")

PENDING_MAX = 10_000  # answers waiting to be written; more are dropped, not queued


def answer_key(capability: str, payload: Any) -> str:
    """The same capability with the same payload shares one remembered answer."""
    material = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    return f"{capability}:{hashlib.sha256(material).hexdigest()}"


class AnswerMemory:
    """Writes answers in the background; reads them when everything else failed."""

    def __init__(self, cache: AnswerCache) -> None:
        self.cache = cache
        self._pending: asyncio.Queue[tuple[str, bytes, float]] = asyncio.Queue(PENDING_MAX)

    def remember(self, capability: str, payload: Any, result: Any, ttl_s: float) -> None:
        """Queue the answer for writing; never waits."""
        # Under overload the answer is dropped: the degraded fallback may serve an older one.
        with contextlib.suppress(asyncio.QueueFull):
            self._pending.put_nowait((answer_key(capability, payload), orjson.dumps(result), ttl_s))

    async def recall(self, capability: str, payload: Any) -> Any | None:
        """The last remembered answer, decoded, or None."""
        raw = await self.cache.get(answer_key(capability, payload))
        return None if raw is None else orjson.loads(raw)

    async def run(self) -> None:
        """Write queued answers until cancelled."""
        while True:
            key, body, ttl_s = await self._pending.get()
            try:
                await self.cache.put(key, body, ttl_s)
            except StoreUnavailable:
                log.warning("answer_not_remembered")
