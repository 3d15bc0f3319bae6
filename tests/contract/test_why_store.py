"""The `WhyStore` contract, sentence by sentence, on the shared backends (memory has none:
one coordinator's journal is all there is to read, so it is not a parameter here)."""

from __future__ import annotations

import asyncio

import pytest
from contract_kit import EXPIRY_MARGIN_S

from agent_reach.backends.bundle import Backends
from agent_reach.backends.protocols import WhyStore
from agent_reach.backends.selection import open_backends
from agent_reach.clock import SYSTEM_CLOCK, ManualClock
from agent_reach.config import Settings

CAP = 3
TTL_S = 1.0  # the expiry test's TTL: the second write comes SPACING_S after the first
SPACING_S = 0.8
ATTEMPTS = 3  # a look that a loaded host delays past the second write's expiry proves nothing


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("redis-cluster", marks=[pytest.mark.redis, pytest.mark.redis_cluster]),
    ]
)
def backend_name(request: pytest.FixtureRequest) -> str:
    """The shared backends only (overrides the contract suite's, which adds memory)."""
    return str(request.param)


@pytest.fixture
def why(backends: Backends) -> WhyStore:
    assert backends.is_shared
    assert backends.why is not None  # a shared backend must share the why records
    return backends.why


async def test_the_memory_backend_has_no_why_store() -> None:
    """What the parametrization leaves out: alone, a coordinator's journal is all there is."""
    memory = await open_backends(Settings(registry_backend="memory"), ManualClock())
    try:
        assert memory.why is None
        assert not memory.is_shared
    finally:
        await memory.aclose()


async def test_records_come_back_per_request_oldest_first(why: WhyStore) -> None:
    await why.add([("req-1", b"a1"), ("req-2", "答".encode()), ("req-1", b"\x00\xff")], CAP, 60)
    await why.add([("req-1", b"a3")], CAP, 60)

    assert await why.get("req-1") == [b"a1", b"\x00\xff", b"a3"]
    assert await why.get("req-2") == ["答".encode()]
    assert await why.get("never-written") == []


async def test_a_request_keeps_only_its_newest_records_past_the_cap(why: WhyStore) -> None:
    await why.add([("req-cap", f"r{n}".encode()) for n in range(5)], CAP, 60)

    assert await why.get("req-cap") == [b"r2", b"r3", b"r4"]


async def test_records_expire_after_the_last_write(why: WhyStore) -> None:
    # Redis expires keys in its own real time (no clock to move): the second write comes
    # SPACING_S after the first, and the records are looked at once the first write's TTL
    # has run out but the second's has not. Expiry after the first write fails that look.
    for attempt in range(ATTEMPTS):
        key = f"req-ttl-{attempt}"
        await why.add([(key, b"first")], CAP, TTL_S)
        first_done = SYSTEM_CLOCK.monotonic()
        await asyncio.sleep(SPACING_S)
        second_sent = SYSTEM_CLOCK.monotonic()
        await why.add([(key, b"second")], CAP, TTL_S)
        await asyncio.sleep(max(0.0, first_done + TTL_S + 0.05 - SYSTEM_CLOCK.monotonic()))
        records = await why.get(key)
        if SYSTEM_CLOCK.monotonic() < second_sent + TTL_S:  # the look was in time
            break
    else:
        pytest.fail(f"the host was too slow to look between the two expiries {ATTEMPTS} times")
    assert records == [b"first", b"second"]  # past the first write's TTL: still there

    async def gone() -> bool:
        return await why.get(key) == []

    deadline = second_sent + TTL_S + EXPIRY_MARGIN_S
    while not await gone():
        assert SYSTEM_CLOCK.monotonic() < deadline, "the why records did not expire"
        await asyncio.sleep(0.02)


async def test_an_empty_batch_writes_nothing(why: WhyStore) -> None:
    await why.add([], CAP, 60)
    assert await why.get("req-none") == []
