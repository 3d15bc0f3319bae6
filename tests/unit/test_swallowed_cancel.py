"""A coordinator's background loop ends when cancelled, even when the store call it was
in turned the cancel into a store error (redis-py's command timeout can): shutdown
waited 15 s for the liveness beat before `honour_cancel`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import pytest
from redis.exceptions import TimeoutError as RedisTimeoutError

from agent_reach.backends.redis.errors import translate_errors
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


class HeldCall:
    """A store call held until cancelled. Its first cancel becomes what a driver made of
    it (`after_cancel`: an error, or an answer with the cancel gone); later ones pass, so
    a broken seam fails the test instead of hanging it."""

    def __init__(self, after_cancel: Callable[[], list[bytes]]) -> None:
        self.entered = asyncio.Event()
        self.calls = 0
        self.after_cancel = after_cancel

    async def call(self) -> list[bytes]:
        self.calls += 1
        self.entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            if self.calls > 1:
                raise
        return self.after_cancel()


def _redis_timeout() -> list[bytes]:
    raise RedisTimeoutError("Timeout reading from 127.0.0.1:6379")


async def test_a_redis_error_in_a_cancelled_task_is_the_cancel() -> None:
    """The Redis seam: a driver error raised while the task is being cancelled ends the
    task (every loop that forgives `StoreUnavailable` then stops, not only the beat)."""
    held = HeldCall(_redis_timeout)
    command = translate_errors(held.call)

    async def forgiving_loop() -> None:
        while True:
            with contextlib.suppress(StoreUnavailable):
                await command()

    task = asyncio.create_task(forgiving_loop())
    await held.entered.wait()
    await _cancel_once(task)
    assert held.calls == 1
    assert task.cancelled()


async def test_a_cancel_the_driver_absorbed_whole_still_ends_the_task() -> None:
    """A blocking read cancelled in a shutdown came back with an empty answer and the
    cancel gone: the queue loop around it pulled on, for 15 s in the suite's teardowns."""
    held = HeldCall(list)
    pull = translate_errors(held.call)

    async def pull_loop() -> None:
        while True:
            await pull()

    task = asyncio.create_task(pull_loop())
    await held.entered.wait()
    await _cancel_once(task)
    assert held.calls == 1
    assert task.cancelled()


async def test_a_redis_error_outside_a_cancel_is_still_a_store_error() -> None:
    @translate_errors
    async def command() -> None:
        raise RedisTimeoutError("Timeout reading from 127.0.0.1:6379")

    with pytest.raises(StoreUnavailable, match="did not answer in time"):
        await command()


async def _cancel_once(task: asyncio.Task[None]) -> None:
    """Cancel `task` once and wait for it to end (a second cancel after 10 s bounds a hang
    only: the test's assertions then fail)."""
    task.cancel()
    await asyncio.wait({task}, timeout=10)
    if not task.done():
        task.cancel()
        await asyncio.wait({task})
