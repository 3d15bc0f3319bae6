"""A coordinator's background loop ends when cancelled, even when the store call it was
in turned the cancel into a store error (redis-py's command timeout can): shutdown
waited 15 s for the liveness beat before `honour_cancel`."""

from __future__ import annotations

import asyncio

from agent_reach.clock import SYSTEM_CLOCK
from agent_reach.errors import StoreUnavailable
from agent_reach.liveness import CoordinatorLiveness


class CancelEatingStore:
    """A liveness store whose first beat, cancelled, raises `StoreUnavailable` instead
    (later beats let a cancel through, so a broken loop fails this test, not hangs it)."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.beats = 0

    async def beat(self, node: str, ttl_s: float) -> frozenset[str]:
        self.beats += 1
        self.entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            if self.beats > 1:
                raise
            raise StoreUnavailable("redis did not answer in time") from None
        return frozenset()


async def test_the_liveness_beat_ends_when_its_store_call_turns_the_cancel_into_an_error() -> None:
    store = CancelEatingStore()
    liveness = CoordinatorLiveness(store, "node-a", 0.04, SYSTEM_CLOCK)  # type: ignore[arg-type]
    task = asyncio.create_task(liveness.run())
    await store.entered.wait()
    task.cancel()
    # the timeout only bounds a hang: without the fix the loop beats on forever
    await asyncio.wait({task}, timeout=10)
    assert task.cancelled()
    assert store.beats == 1
