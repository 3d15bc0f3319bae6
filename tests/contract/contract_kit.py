"""What the contract suites share: letting time pass on either backend, and Redis outages.

Imported by the suites and their conftest (pytest puts this directory on `sys.path`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import pytest

from agent_reach.backends.bundle import Backends
from agent_reach.clock import SYSTEM_CLOCK, Clock, ManualClock
from agent_reach.config import Settings
from agent_reach.errors import StoreUnavailable
from agent_reach.testing.redis_server import RedisServer

T = TypeVar("T")

POLL_INTERVAL_S = 0.02
EXPIRY_MARGIN_S = 5.0  # how much later than due a real Redis expiry may take to show
OUTAGE_DEADLINE_S = 5.0  # a call to a dead Redis must fail long before this

Check = Callable[[], Awaitable[bool]]


async def eventually(check: Check, *, timeout_s: float, failure: str) -> None:
    """Poll `check` in real time until it holds; fail with `failure` when `timeout_s` passes."""
    deadline = SYSTEM_CLOCK.monotonic() + timeout_s
    while not await check():
        if SYSTEM_CLOCK.monotonic() > deadline:
            pytest.fail(f"{failure} (waited {timeout_s} s)")
        await asyncio.sleep(POLL_INTERVAL_S)


@dataclass
class Timeline:
    """Time as the backend under test sees it: a manual clock is moved, real time passes."""

    clock: Clock

    async def elapse(self, seconds: float) -> None:
        """Let `seconds` pass, to show that something does not happen within them."""
        if isinstance(self.clock, ManualClock):
            self.clock.advance(seconds)
        else:
            await asyncio.sleep(seconds)

    async def wait_out(self, seconds: float, check: Check, *, failure: str) -> None:
        """Return once `check` holds, as it must once `seconds` have passed (an expiry)."""
        if isinstance(self.clock, ManualClock):
            self.clock.advance(max(0.0, seconds))
            if not await check():
                pytest.fail(f"{failure} ({seconds} s later)")
            return
        await eventually(check, timeout_s=max(0.0, seconds) + EXPIRY_MARGIN_S, failure=failure)


@dataclass
class RedisOutage:
    """A private Redis to stop and start, the settings that reach it, a bundle opened on it."""

    server: RedisServer
    settings: Settings
    backends: Backends

    async def stop(self) -> None:
        await asyncio.to_thread(self.server.stop)

    async def start(self) -> None:
        await asyncio.to_thread(self.server.start)


async def once_answering(operation: Callable[[], Awaitable[T]]) -> T:
    """`operation()` after Redis came back. A call that only timed out (a busy host can
    outlast the outage tests' 0.2 s store timeout) is made again within
    OUTAGE_DEADLINE_S; any other error fails at once, so a pool the restart left stale
    (`redis is unreachable`) is still caught on the first call."""
    give_up = SYSTEM_CLOCK.monotonic() + OUTAGE_DEADLINE_S
    while True:
        try:
            return await operation()
        except StoreUnavailable as exc:
            if exc.message != "redis did not answer in time":
                raise
            if SYSTEM_CLOCK.monotonic() > give_up:
                raise


async def assert_unavailable(call: Awaitable[object]) -> StoreUnavailable:
    """The awaited call fails with `StoreUnavailable`, well within the outage deadline."""
    with pytest.raises(StoreUnavailable) as caught:
        async with asyncio.timeout(OUTAGE_DEADLINE_S):
            await call
    assert caught.value.message.startswith("redis ")
    return caught.value
