"""The `RunStore` and `WorkflowStore` contracts on every backend."""

from __future__ import annotations

import asyncio

from contract_kit import Timeline

from agent_reach.backends.bundle import Backends

TTL_S = 0.3  # short, so a real Redis expiry runs out within the test
LONG_S = 60.0
RECORD = '{"run_id": "r-1", "intent": "发货查询"}'.encode() + b"\x00\xff"


async def test_create_stores_a_new_run_once(backends: Backends) -> None:
    runs = backends.runs
    assert await runs.create("r-1", RECORD, LONG_S, keep_recent=10) is True
    assert await runs.create("r-1", b"other", LONG_S, keep_recent=10) is False

    assert await runs.get("r-1") == RECORD
    assert await runs.recent(10) == ["r-1"]


async def test_concurrent_creates_of_one_key_have_one_winner(backends: Backends) -> None:
    created = await asyncio.gather(
        *(
            backends.runs.create("r-race", f"{i}".encode(), LONG_S, keep_recent=10)
            for i in range(20)
        )
    )

    assert created.count(True) == 1
    assert await backends.runs.get("r-race") == str(created.index(True)).encode()
    assert await backends.runs.recent(10) == ["r-race"]


async def test_put_replaces_the_record_and_keeps_its_place(backends: Backends) -> None:
    runs = backends.runs
    await runs.create("r-1", b"v1", LONG_S, keep_recent=10)
    await runs.put("r-1", b"v2", LONG_S)

    assert await runs.get("r-1") == b"v2"
    assert await runs.recent(10) == ["r-1"]


async def test_recent_lists_the_newest_first_and_keeps_only_so_many(backends: Backends) -> None:
    runs = backends.runs
    for i in range(5):
        await runs.create(f"r-{i}", b"{}", LONG_S, keep_recent=3)

    assert await runs.recent(10) == ["r-4", "r-3", "r-2"]
    assert await runs.recent(2) == ["r-4", "r-3"]
    assert await runs.recent(0) == []
    assert await runs.get("r-0") == b"{}"  # out of the list, still readable


async def test_a_run_expires_after_its_ttl(backends: Backends, timeline: Timeline) -> None:
    runs = backends.runs
    await runs.create("r-short", RECORD, TTL_S, keep_recent=10)
    await runs.create("r-long", RECORD, LONG_S, keep_recent=10)

    async def has_expired() -> bool:
        return await runs.get("r-short") is None

    await timeline.wait_out(TTL_S, has_expired, failure="the run never expired")
    assert await runs.get("r-long") == RECORD
    assert await runs.create("r-short", b"again", LONG_S, keep_recent=10) is True


async def test_definitions_are_kept_by_key_and_replaced(backends: Backends) -> None:
    definitions = backends.workflows
    assert await definitions.get("shipment") is None
    await definitions.put("shipment", b"v1")
    await definitions.put("shipment", RECORD)

    assert await definitions.get("shipment") == RECORD
    assert await backends.runs.get("shipment") is None  # runs and definitions do not share keys


async def test_a_cancel_mark_is_set_once_and_expires_with_its_ttl(
    backends: Backends, timeline: Timeline
) -> None:
    runs = backends.runs
    assert await runs.is_cancelled("r-1") is False
    assert await runs.cancel("r-1", TTL_S) is True
    assert await runs.cancel("r-1", TTL_S) is False
    assert (await runs.is_cancelled("r-1"), await runs.is_cancelled("r-2")) == (True, False)
    assert await runs.get("r-1") is None  # a mark, not a record

    async def has_expired() -> bool:
        return not await runs.is_cancelled("r-1")

    await timeline.wait_out(TTL_S, has_expired, failure="the cancel mark never expired")


async def test_concurrent_cancels_have_one_winner(backends: Backends) -> None:
    marked = await asyncio.gather(*(backends.runs.cancel("r-race", LONG_S) for _ in range(20)))

    assert marked.count(True) == 1
