"""The `QueueStore` contract, sentence by sentence, on every backend."""

from __future__ import annotations

import asyncio

import pytest
from contract_kit import Timeline

from agent_reach.backends.bundle import Backends
from agent_reach.backends.protocols import QueueStore

STALE_S = 1.0  # long against one touch interval, so a touched entry never looks stale
TOUCH_EVERY_S = STALE_S / 4
LONG_S = 60.0  # a stale_s no entry reaches during a test
BLOCK_S = 10.0  # a pull still waiting this long has missed the push that should wake it
PUSH_HEADSTART_S = 0.1  # lets the pull start waiting first; the outcome does not depend on it
PAYLOADS = [b'{"task": 1}', "挂起的请求".encode(), b"\x00\xff binary"]


@pytest.fixture
def queues(backends: Backends) -> QueueStore:
    return backends.queues


async def push_all(queues: QueueStore, payloads: list[bytes]) -> list[tuple[str, bytes]]:
    return [(await queues.push("suspended", p), p) for p in payloads]


async def take(queues: QueueStore, consumer: str) -> list[tuple[str, bytes]]:
    """What `consumer` gets at once, counting an entry stale after `STALE_S`."""
    return await queues.pull("suspended", consumer, count=1, block_s=0, stale_s=STALE_S)


async def test_pushed_entries_are_pulled_in_order_with_their_ids_and_gone_once_acked(
    queues: QueueStore,
) -> None:
    pushed = await push_all(queues, PAYLOADS)

    pulled = await queues.pull("suspended", "a", count=10, block_s=0, stale_s=LONG_S)
    for entry_id, _ in pulled:
        await queues.ack("suspended", entry_id)

    assert pulled == pushed
    assert await queues.pull("suspended", "b", count=10, block_s=0, stale_s=0) == []
    assert await queues.depth("suspended") == 0


async def test_pull_hands_out_at_most_count_entries(queues: QueueStore) -> None:
    pushed = await push_all(queues, PAYLOADS)

    first = await queues.pull("suspended", "a", count=2, block_s=0, stale_s=LONG_S)
    rest = await queues.pull("suspended", "a", count=2, block_s=0, stale_s=LONG_S)

    assert (first, rest) == (pushed[:2], pushed[2:])


async def test_queues_are_independent(queues: QueueStore) -> None:
    entry_id = await queues.push("suspended", b"one")

    assert await queues.pull("dead-letters", "a", count=10, block_s=0, stale_s=0) == []
    assert await queues.depth("dead-letters") == 0
    assert await queues.pull("suspended", "a", count=10, block_s=0, stale_s=0) == [
        (entry_id, b"one")
    ]


async def test_depth_counts_entries_pushed_and_not_yet_acked(queues: QueueStore) -> None:
    pushed = await push_all(queues, PAYLOADS)
    assert await queues.depth("suspended") == 3

    pulled = await queues.pull("suspended", "a", count=2, block_s=0, stale_s=LONG_S)
    assert await queues.depth("suspended") == 3

    await queues.ack("suspended", pulled[0][0])
    assert await queues.depth("suspended") == 2

    await queues.ack("suspended", pushed[2][0])  # never pulled: acked all the same
    assert await queues.depth("suspended") == 1


async def test_an_entry_its_consumer_stops_touching_goes_to_another_consumer_once_stale(
    queues: QueueStore, timeline: Timeline
) -> None:
    [entry] = await push_all(queues, [b"job"])
    assert await take(queues, "a") == [entry]
    assert await take(queues, "b") == []

    async def goes_to_b() -> bool:
        return await take(queues, "b") == [entry]

    await timeline.wait_out(STALE_S, goes_to_b, failure="the stale entry never went to b")
    assert await queues.depth("suspended") == 1


async def test_an_entry_its_consumer_keeps_touching_never_goes_to_another(
    queues: QueueStore, timeline: Timeline
) -> None:
    [entry] = await push_all(queues, [b"job"])
    await take(queues, "a")

    taken_by_b: list[tuple[str, bytes]] = []
    for _ in range(round(STALE_S / TOUCH_EVERY_S) + 2):  # well past STALE_S in all
        await timeline.elapse(TOUCH_EVERY_S)
        await queues.touch("suspended", "a", [entry[0]])
        taken_by_b += await take(queues, "b")

    assert taken_by_b == []


async def test_touches_by_a_consumer_that_lost_the_entry_do_not_keep_it_from_going_stale(
    queues: QueueStore, timeline: Timeline
) -> None:
    [entry] = await push_all(queues, [b"job"])
    await take(queues, "a")

    async def goes_to_b() -> bool:
        return await take(queues, "b") == [entry]

    async def goes_to_c_while_a_touches() -> bool:
        await queues.touch("suspended", "a", [entry[0]])
        return await take(queues, "c") == [entry]

    await timeline.wait_out(STALE_S, goes_to_b, failure="the stale entry never went to b")
    await timeline.wait_out(
        STALE_S, goes_to_c_while_a_touches, failure="a, which lost the entry, kept it from c"
    )


async def test_a_blocking_pull_returns_the_entry_another_task_pushes_meanwhile(
    queues: QueueStore,
) -> None:
    async def push_later() -> str:
        await asyncio.sleep(PUSH_HEADSTART_S)
        return await queues.push("suspended", b"late job")

    pulled, entry_id = await asyncio.gather(
        queues.pull("suspended", "a", count=10, block_s=BLOCK_S, stale_s=LONG_S), push_later()
    )

    assert pulled == [(entry_id, b"late job")]


async def test_a_blocking_pull_with_nothing_to_take_returns_empty(queues: QueueStore) -> None:
    assert await queues.pull("suspended", "a", count=10, block_s=0.2, stale_s=LONG_S) == []


async def test_two_consumers_pulling_at_once_never_get_the_same_new_entry(
    queues: QueueStore,
) -> None:
    pushed = await push_all(queues, [f"job-{n}".encode() for n in range(40)])

    pulled: list[tuple[str, bytes]] = []
    while True:
        batches = await asyncio.gather(
            *(
                queues.pull("suspended", consumer, count=3, block_s=0, stale_s=LONG_S)
                for consumer in ("a", "b")
            )
        )
        if not any(batches):
            break
        pulled += [entry for batch in batches for entry in batch]

    assert sorted(pulled) == sorted(pushed)


ONCE_TTL_S = 1.0


async def test_push_once_appends_one_entry_per_id_until_its_ttl_runs_out(
    queues: QueueStore, timeline: Timeline
) -> None:
    first = await queues.push_once("runs", b"run-1", once="run-1", ttl_s=ONCE_TTL_S)
    again = await queues.push_once("runs", b"run-1", once="run-1", ttl_s=ONCE_TTL_S)
    other_id = await queues.push_once("runs", b"run-2", once="run-2", ttl_s=ONCE_TTL_S)
    other_queue = await queues.push_once("suspended", b"run-1", once="run-1", ttl_s=ONCE_TTL_S)

    assert (first, again, other_id, other_queue) == (True, False, True, True)
    pulled = await queues.pull("runs", "a", count=10, block_s=0, stale_s=LONG_S)
    assert [payload for _, payload in pulled] == [b"run-1", b"run-2"]

    async def pushes_again() -> bool:
        return await queues.push_once("runs", b"run-1", once="run-1", ttl_s=LONG_S)

    await timeline.wait_out(ONCE_TTL_S, pushes_again, failure="the push-once marker never expired")
    assert await queues.depth("runs") == 3


async def test_push_once_racing_itself_appends_exactly_once(queues: QueueStore) -> None:
    pushed = await asyncio.gather(
        *(queues.push_once("runs", b"run-x", once="run-x", ttl_s=LONG_S) for _ in range(20))
    )

    assert pushed.count(True) == 1
    assert await queues.depth("runs") == 1
