"""The memory backend's expiring records and its byte budget for completed request ids."""

from __future__ import annotations

from agent_reach.backends.memory.expiring import ExpiringDict
from agent_reach.backends.memory.idempotency import RECORD_OVERHEAD_BYTES, MemoryIdempotencyStore
from agent_reach.clock import ManualClock

ANSWER = b"x" * 1000
RECORD = len(ANSWER) + RECORD_OVERHEAD_BYTES
LONG_S = 3600.0


def test_an_entry_lives_until_its_deadline_and_a_rewrite_moves_it() -> None:
    clock = ManualClock()
    entries: ExpiringDict[str] = ExpiringDict(clock.monotonic)
    entries.set("a", "first", 10)
    clock.advance(6)
    entries.set("a", "second", 10)  # now due at 16, not 10
    clock.advance(5)
    entries.set("b", "other", 10)  # a write sweeps: the old deadline of "a" is stale

    assert entries.get("a") == "second"
    clock.advance(5)
    assert entries.get("a") is None
    assert entries.get("b") == "other"


def test_expired_entries_do_not_pile_up_under_writes() -> None:
    clock = ManualClock()
    entries: ExpiringDict[int] = ExpiringDict(clock.monotonic)
    for n in range(10_000):
        entries.set(f"k{n}", n, 1.0)
        clock.advance(0.01)

    assert len(entries) <= 101  # the last second's writes, nothing older
    assert entries.get("k9999") == 9999


def test_a_batch_written_at_once_sweeps_and_expires_as_single_writes() -> None:
    clock = ManualClock()
    entries: ExpiringDict[int] = ExpiringDict(clock.monotonic)
    entries.set("old", 0, 1.0)
    clock.advance(2)
    entries.set_many([("a", 1), ("b", 2), ("a", 3)], 10)  # sweeps "old"; a rewrite wins

    assert len(entries) == 2
    assert entries.get("a") == 3 and entries.get("b") == 2
    for n in range(200):  # stale heap rows do not pile up either
        entries.set_many([(f"k{n}", n)], 10)
        clock.advance(0.1)
    assert len(entries._deadlines) <= 2 * len(entries) + 64
    clock.advance(10)
    assert entries.get("a") is None and entries.get("k199") is None


async def test_beyond_the_budget_the_oldest_answers_are_forgotten_first() -> None:
    clock = ManualClock()
    store = MemoryIdempotencyStore(clock, max_bytes=10 * RECORD)
    running = await store.claim("running", "f", LONG_S)
    for n in range(20):
        claim = await store.claim(f"req-{n}", "f", LONG_S)
        assert await store.complete(f"req-{n}", claim.fence, 200, ANSWER, LONG_S)

    assert store.forgotten == 10
    assert [(await store.claim(f"req-{n}", "f", LONG_S)).state for n in (0, 9)] == [
        "claimed",  # forgotten: a repeat runs again
        "claimed",
    ]
    replayed = [await store.claim(f"req-{n}", "f", LONG_S) for n in range(10, 20)]
    assert {(c.state, c.body) for c in replayed} == {("completed", ANSWER)}
    assert (await store.claim("running", "f", LONG_S)).state == "in_progress"
    assert await store.complete("running", running.fence, 200, ANSWER, LONG_S)


async def test_expired_answers_leave_the_budget_without_forgetting_live_ones() -> None:
    clock = ManualClock()
    store = MemoryIdempotencyStore(clock, max_bytes=10 * RECORD)
    for n in range(10):
        claim = await store.claim(f"old-{n}", "f", LONG_S)
        await store.complete(f"old-{n}", claim.fence, 200, ANSWER, 1.0)
    clock.advance(2.0)
    for n in range(10):
        claim = await store.claim(f"new-{n}", "f", LONG_S)
        await store.complete(f"new-{n}", claim.fence, 200, ANSWER, LONG_S)

    assert store.forgotten == 0
    assert (await store.claim("new-0", "f", LONG_S)).state == "completed"
