"""The dead-letter queue: requests refused for good (hop limit), kept for inspection."""

from __future__ import annotations

from typing import Any

import orjson
import structlog

from agent_reach.backends.protocols import JournalStore
from agent_reach.clock import Clock
from agent_reach.errors import StoreUnavailable
from agent_reach.model.invocations import InvokeRequest
from agent_reach.observability.metrics import Metrics

log = structlog.get_logger("agent_reach.deadletters")

JOURNAL = "deadletters"
CAP = 10_000  # newest dead letters kept; older ones fall off


class DeadLetters:
    """Records dead-lettered requests; they are never delivered again."""

    def __init__(self, journal: JournalStore, clock: Clock, metrics: Metrics) -> None:
        self.journal = journal
        self.clock = clock
        self.metrics = metrics

    async def add(
        self, reason: str, request: InvokeRequest, *, request_id: str, trace_id: str, hop: int
    ) -> None:
        """Keep the request with why it died; a store outage is logged, never raised."""
        record = {
            "time": self.clock.wall(),
            "reason": reason,
            "request_id": request_id,
            "trace_id": trace_id,
            "hop": hop,
            "request": request.model_dump(mode="json", exclude_none=True),
        }
        self.metrics.dead_letters.labels(reason).inc()
        log.warning(
            "request_dead_lettered", reason=reason, request_id=request_id, trace_id=trace_id
        )
        try:
            await self.journal.append(JOURNAL, orjson.dumps(record), CAP)
        except StoreUnavailable:
            log.error("dead_letter_lost", request_id=request_id)

    async def recent(self, limit: int) -> list[dict[str, Any]]:
        return [orjson.loads(raw) for raw in await self.journal.recent(JOURNAL, limit)]

    async def count(self) -> int:
        return await self.journal.count(JOURNAL)
