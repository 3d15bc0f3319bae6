"""The sweeper: keeps referenced contexts alive and clears out expired ones.

Every pass first holds each context an in-flight request refers to (with its live
segments) for `HOLD_PASSES` intervals, then asks the store to remove what has
expired. On Redis the removing is Redis's own expiry, so a pass is only the holding:
the one thing Redis cannot know is which contexts a running request still needs.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import structlog

from agent_reach.backends.protocols import ContextStore
from agent_reach.context.references import References
from agent_reach.errors import StoreUnavailable

log = structlog.get_logger("agent_reach.context")

# A hold spans three passes, so two missed passes (a stalled loop, a Redis blip) still
# never let a context expire under a running request.
HOLD_PASSES = 3


@dataclass(frozen=True, slots=True)
class SweepReport:
    """One pass: contexts held for in-flight requests, and contexts and segments removed."""

    held: int
    contexts_removed: int
    segments_removed: int


class ContextSweeper:
    """Runs a pass every `interval_s` seconds until cancelled."""

    def __init__(self, store: ContextStore, references: References, *, interval_s: float) -> None:
        self.store = store
        self.references = references
        self.interval_s = interval_s
        self.hold_s = HOLD_PASSES * interval_s

    async def sweep_once(self) -> SweepReport:
        held = await self.store.hold(self.references.context_ids(), self.hold_s)
        swept = await self.store.sweep()
        return SweepReport(held, swept.contexts, swept.segments)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                report = await self.sweep_once()
            except StoreUnavailable:
                log.warning("context_sweep_failed")
                continue
            log.debug(
                "contexts_swept",
                held=report.held,
                contexts_removed=report.contexts_removed,
                segments_removed=report.segments_removed,
            )
