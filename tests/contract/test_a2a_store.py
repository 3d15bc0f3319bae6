"""The `A2AStore` contract on every backend: the face's tasks per owner, listed newest
first and expiring; push configs per task; the watched set; claims taken once."""

from __future__ import annotations

import asyncio

from contract_kit import Timeline

from agent_reach.backends.bundle import Backends

TTL_S = 0.3  # short, so a real Redis expiry runs out within the test
LONG_S = 60.0
OWNER, OTHER = "shop-app/", ""  # a principal's owner name, and the anonymous caller's


async def test_tasks_are_listed_newest_first_up_to_the_limit_and_per_owner(
    backends: Backends,
) -> None:
    store = backends.a2a
    for n, created in enumerate([10.0, 30.0, 20.0]):
        await store.put_task(OWNER, f"t{n}", f"doc{n}".encode(), created, LONG_S)
    await store.put_task(OTHER, "t9", b"theirs", 40.0, LONG_S)

    assert await store.list_tasks(OWNER, 10) == [b"doc1", b"doc2", b"doc0"]
    assert await store.list_tasks(OWNER, 2) == [b"doc1", b"doc2"]
    assert await store.list_tasks(OTHER, 10) == [b"theirs"]
    assert await store.get_task(OWNER, "t2") == b"doc2"
    assert await store.get_task(OTHER, "t2") is None


async def test_only_the_newest_thousand_tasks_of_an_owner_are_listed(backends: Backends) -> None:
    store = backends.a2a
    made = 1000 + 150  # past the cap and past the memory index's trimming slack
    for n in range(made):
        await store.put_task(OWNER, f"t{n}", f"doc{n}".encode(), float(n), LONG_S)

    listed = await store.list_tasks(OWNER, 5000)
    assert listed == [f"doc{n}".encode() for n in range(made - 1, made - 1001, -1)]
    assert await store.list_tasks(OWNER, 3) == [b"doc1149", b"doc1148", b"doc1147"]


async def test_a_replaced_task_keeps_its_place_and_takes_the_new_document(
    backends: Backends,
) -> None:
    store = backends.a2a
    await store.put_task(OWNER, "a", b"first", 1.0, LONG_S)
    await store.put_task(OWNER, "b", b"second", 2.0, LONG_S)
    await store.put_task(OWNER, "a", b"first, updated", 3.0, LONG_S)

    assert await store.list_tasks(OWNER, 10) == [b"second", b"first, updated"]


async def test_an_expired_task_is_neither_read_nor_listed(
    backends: Backends, timeline: Timeline
) -> None:
    store = backends.a2a
    await store.put_task(OWNER, "short", b"gone soon", 1.0, TTL_S)
    await store.put_task(OWNER, "long", b"stays", 2.0, LONG_S)

    async def expired() -> bool:
        return await store.get_task(OWNER, "short") is None

    await timeline.wait_out(TTL_S, expired, failure="the task did not expire")
    assert await store.list_tasks(OWNER, 10) == [b"stays"]


async def test_push_configs_are_kept_per_task_and_the_task_is_watched_until_unwatched(
    backends: Backends,
) -> None:
    store = backends.a2a
    await store.put_push(OWNER, "t1", "c1", b"one", LONG_S)
    await store.put_push(OWNER, "t1", "c2", b"two", LONG_S)
    await store.put_push(OWNER, "t1", "c1", b"one, replaced", LONG_S)

    assert await store.list_push(OWNER, "t1") == {"c1": b"one, replaced", "c2": b"two"}
    assert await store.list_push(OTHER, "t1") == {}
    assert await store.watched() == [(OWNER, "t1")]
    assert await store.delete_push(OWNER, "t1", "c2") is True
    assert await store.delete_push(OWNER, "t1", "c2") is False
    assert await store.list_push(OWNER, "t1") == {"c1": b"one, replaced"}
    await store.unwatch(OWNER, "t1")
    assert await store.watched() == []


async def test_of_racing_claims_on_one_update_exactly_one_wins(backends: Backends) -> None:
    store = backends.a2a
    wins = await asyncio.gather(*(store.claim_update("t1\nc1\nDONE", LONG_S) for _ in range(8)))

    assert sorted(wins) == [False] * 7 + [True]
    assert await store.claim_update("t1\nc1\nWORKING", LONG_S) is True
