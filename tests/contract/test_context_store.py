"""The `ContextStore` contract, sentence by sentence, on every backend.

Also the `ContextService` rules that rest on it (merge patch, limits), run on each
backend's store, since a refused write must leave every backend unchanged.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from contract_kit import Timeline

from agent_reach.backends.bundle import Backends
from agent_reach.backends.protocols import ContextStore, SegmentPolicy, StoredContext, Swept
from agent_reach.backends.selection import open_backends
from agent_reach.clock import Clock
from agent_reach.config import Settings
from agent_reach.context.service import ContextService
from agent_reach.context.tokens import CALLER_GRANT
from agent_reach.errors import PayloadTooLarge, ValidationFailed

TTL_S = 1.0  # short, so a real Redis expiry runs out within the test
LONG_S = 600.0  # a ttl that does not run out during a test
POLICY = SegmentPolicy(items=3, max_bytes=1024, max_segments=4)
DOCUMENT = {"product": {"sku": "SKU-778", "name": "手机"}, "user": {"intent": "buy"}}
WRITERS = 20


@pytest.fixture
def store(backends: Backends) -> ContextStore:
    return backends.contexts


def encoded(document: dict[str, Any]) -> bytes:
    return orjson.dumps(document)


def turns(*numbers: int) -> list[bytes]:
    return [orjson.dumps({"turn": n, "text": "还有货吗"}) for n in numbers]


async def create(store: ContextStore, context_id: str = "c1", ttl_s: float = LONG_S) -> None:
    assert await store.create(context_id, encoded(DOCUMENT), DOCUMENT.keys(), ttl_s)


async def read(store: ContextStore, context_id: str = "c1") -> StoredContext:
    stored = await store.read(context_id, None)
    assert stored is not None, f"context {context_id} is gone"
    return stored


def contents(stored: StoredContext | None) -> tuple[Any, ...] | None:
    """What a read found, leaving out the remaining life (a read renews it)."""
    if stored is None:
        return None
    return (stored.document, stored.version, stored.lists, stored.list_names)


async def presence(store: ContextStore, context_id: str) -> str:
    """`conflict` while the context exists, `missing` once it is gone; renews nothing.

    Version 0 is never stored (a context starts at 1), so the write is always refused.
    """
    return (await store.write(context_id, b"{}", (), version=0)).state


async def test_a_created_context_is_read_back_at_version_1(store: ContextStore) -> None:
    await create(store)

    stored = await read(store)

    assert orjson.loads(stored.document) == DOCUMENT
    assert stored.version == 1
    assert (stored.lists, stored.list_names, stored.segments_read) == ({}, frozenset(), 0)
    assert 0 < stored.expires_in_s <= LONG_S
    assert stored.bytes_read == len(encoded(DOCUMENT))


async def test_create_refuses_a_taken_id_and_changes_nothing(store: ContextStore) -> None:
    await create(store)

    assert await store.create("c1", b'{"other": 1}', ["other"], LONG_S) is False

    assert orjson.loads((await read(store)).document) == DOCUMENT


async def test_an_unknown_context_reads_as_none_and_cannot_be_written(
    store: ContextStore,
) -> None:
    assert await store.read("nope", None) is None
    assert (await store.write("nope", b"{}", (), version=1)).state == "missing"
    assert (await store.append("nope", "turns", turns(1), version=None, policy=POLICY)).state == (
        "missing"
    )
    assert await store.delete("nope") is False


async def test_a_write_at_the_read_version_lands_and_a_stale_one_conflicts(
    store: ContextStore,
) -> None:
    await create(store)
    first = await store.write("c1", b'{"step": 1}', ["step"], version=1)

    stale = await store.write("c1", b'{"step": "stale"}', ["step"], version=1)

    assert (first.state, first.version) == ("written", 2)
    assert 0 < first.expires_in_s <= LONG_S
    assert (stale.state, stale.version) == ("conflict", 2)
    stored = await read(store)
    assert (orjson.loads(stored.document), stored.version) == ({"step": 1}, 2)


async def test_concurrent_compare_and_set_keeps_exactly_the_successful_writes(
    store: ContextStore,
) -> None:
    assert await store.create("c1", b'{"n": 0}', ["n"], LONG_S)

    async def increment_once() -> bool:
        stored = await read(store)
        await asyncio.sleep(0)  # a yield point: the other writers read the same version
        n = orjson.loads(stored.document)["n"]
        outcome = await store.write("c1", encoded({"n": n + 1}), ["n"], version=stored.version)
        return outcome.state == "written"

    landed = await asyncio.gather(*(increment_once() for _ in range(WRITERS)))

    assert orjson.loads((await read(store)).document)["n"] == sum(landed) >= 1


async def test_writers_that_retry_their_conflicts_never_lose_an_update(
    store: ContextStore,
) -> None:
    assert await store.create("c1", b'{"n": 0}', ["n"], LONG_S)

    async def increment() -> None:
        while True:
            stored = await read(store)
            await asyncio.sleep(0)
            n = orjson.loads(stored.document)["n"]
            outcome = await store.write("c1", encoded({"n": n + 1}), ["n"], version=stored.version)
            if outcome.state == "written":
                return

    await asyncio.gather(*(increment() for _ in range(WRITERS)))

    stored = await read(store)
    assert orjson.loads(stored.document)["n"] == WRITERS
    assert stored.version == 1 + WRITERS


async def test_appends_fill_a_segment_then_roll_over_to_new_ones(store: ContextStore) -> None:
    await create(store)

    first = await store.append("c1", "turns", turns(1, 2), version=None, policy=POLICY)
    second = await store.append("c1", "turns", turns(3, 4, 5, 6, 7), version=2, policy=POLICY)

    assert (first.state, first.version, second.state, second.version) == (
        "written",
        2,
        "written",
        3,
    )
    stored = await read(store)
    assert stored.lists == {"turns": turns(1, 2, 3, 4, 5, 6, 7)}
    assert stored.segments_read == 3  # [1 2 3] [4 5 6] [7]
    assert stored.list_names == {"turns"}
    assert stored.bytes_read == len(stored.document) + sum(map(len, turns(1, 2, 3, 4, 5, 6, 7)))


async def test_a_segment_also_rolls_over_when_the_next_item_would_pass_its_bytes(
    store: ContextStore,
) -> None:
    await create(store)
    big, small = b'"' + b"x" * 600 + b'"', b'"y"'
    policy = SegmentPolicy(items=100, max_bytes=1024, max_segments=4)

    await store.append("c1", "log", [big, small], version=None, policy=policy)
    await store.append("c1", "log", [big], version=None, policy=policy)  # 600 + 3 + 602 > 1024

    stored = await read(store)
    assert stored.lists == {"log": [big, small, big]}
    assert stored.segments_read == 2


async def test_an_append_with_a_stale_version_conflicts_and_adds_nothing(
    store: ContextStore,
) -> None:
    await create(store)
    await store.append("c1", "turns", turns(1), version=None, policy=POLICY)

    outcome = await store.append("c1", "turns", turns(2), version=1, policy=POLICY)

    assert (outcome.state, outcome.version) == ("conflict", 2)
    assert (await read(store)).lists == {"turns": turns(1)}


async def test_an_append_to_a_document_field_is_refused(store: ContextStore) -> None:
    await create(store)

    outcome = await store.append("c1", "product", turns(1), version=None, policy=POLICY)

    assert (outcome.state, outcome.version) == ("not_a_list", 1)
    stored = await read(store)
    assert (stored.version, stored.list_names) == (1, frozenset())


async def test_an_append_past_the_segment_limit_is_refused_whole(store: ContextStore) -> None:
    await create(store)
    await store.append("c1", "turns", turns(*range(9)), version=None, policy=POLICY)  # 3 segments
    await store.append("c1", "events", turns(1), version=None, policy=POLICY)  # the 4th

    outcome = await store.append("c1", "turns", turns(9, 10), version=None, policy=POLICY)

    assert (outcome.state, outcome.version) == ("too_many_segments", 3)
    stored = await read(store)
    assert stored.version == 3
    assert stored.lists == {"turns": turns(*range(9)), "events": turns(1)}
    assert stored.segments_read == 4


async def test_a_read_loads_only_the_lists_it_names(store: ContextStore) -> None:
    await create(store)
    await store.append("c1", "turns", turns(1, 2), version=None, policy=POLICY)
    await store.append("c1", "events", turns(3), version=None, policy=POLICY)

    only_turns = await store.read("c1", ["turns", "product"])
    nothing = await store.read("c1", ())

    assert only_turns is not None and nothing is not None
    assert only_turns.lists == {"turns": turns(1, 2)}
    assert only_turns.list_names == nothing.list_names == {"turns", "events"}
    assert only_turns.segments_read == 1
    assert (nothing.lists, nothing.segments_read, nothing.bytes_read) == (
        {},
        0,
        len(nothing.document),
    )


async def test_a_write_drops_the_lists_it_names_with_their_segments(store: ContextStore) -> None:
    await create(store)
    await store.append("c1", "turns", turns(1, 2, 3, 4), version=None, policy=POLICY)

    outcome = await store.write("c1", b"{}", (), version=2, drop_lists=["turns"])
    await store.append("c1", "turns", turns(9), version=None, policy=POLICY)

    assert outcome.state == "written"
    stored = await read(store)
    assert stored.lists == {"turns": turns(9)}
    assert stored.segments_read == 1


async def test_delete_removes_the_context_and_every_segment(store: ContextStore) -> None:
    await create(store)
    await store.append("c1", "turns", turns(1, 2, 3, 4), version=None, policy=POLICY)

    assert await store.delete("c1") is True

    assert await store.read("c1", None) is None
    await create(store)
    assert (await read(store)).list_names == frozenset()


async def test_a_context_expires_its_ttl_after_its_last_use(
    store: ContextStore, timeline: Timeline
) -> None:
    await create(store, ttl_s=TTL_S)
    await timeline.elapse(TTL_S * 0.6)
    await read(store)  # renews
    await timeline.elapse(TTL_S * 0.6)

    assert await presence(store, "c1") == "conflict"  # 1.2 ttl after creation, still there

    async def is_gone() -> bool:
        return await presence(store, "c1") == "missing"

    await timeline.wait_out(TTL_S * 0.4, is_gone, failure="the context did not expire")
    assert await store.read("c1", None) is None


async def test_access_is_kept_as_created_and_read_without_renewing(
    store: ContextStore, timeline: Timeline
) -> None:
    access = b'{"owner":"cs-bot","share_with":["domain:warehouse"]}'
    assert await store.create("c1", encoded(DOCUMENT), DOCUMENT.keys(), TTL_S, access)
    await create(store, "c2")
    assert await store.access("c1") == access
    assert await store.access("c2") == b""  # created without: belongs to no one
    assert await store.access("nope") is None
    await store.write("c1", b"{}", (), version=1)
    assert await store.access("c1") == access  # writes never change it
    await timeline.elapse(TTL_S * 0.6)
    assert await store.access("c1") == access

    async def is_gone() -> bool:  # reading the access renewed nothing
        return await store.access("c1") is None

    await timeline.wait_out(TTL_S * 0.5, is_gone, failure="the context did not expire")


async def test_old_segments_expire_and_a_read_loads_only_the_live_ones(
    store: ContextStore, timeline: Timeline
) -> None:
    await create(store, ttl_s=TTL_S)
    await store.append("c1", "turns", turns(1, 2, 3), version=None, policy=POLICY)
    await timeline.elapse(TTL_S * 0.6)
    await store.append("c1", "turns", turns(4, 5), version=None, policy=POLICY)  # segment 2

    async def only_the_second_segment_is_read() -> bool:
        stored = await read(store)
        return stored.lists == {"turns": turns(4, 5)} and stored.segments_read == 1

    await timeline.wait_out(
        TTL_S * 0.4, only_the_second_segment_is_read, failure="the first segment did not expire"
    )
    # The freed segment no longer counts against the limit: three more fit.
    outcome = await store.append("c1", "turns", turns(*range(6, 14)), version=None, policy=POLICY)
    assert outcome.state == "written"


async def test_hold_keeps_a_context_and_its_segments_past_their_ttl(
    store: ContextStore, timeline: Timeline
) -> None:
    await create(store, ttl_s=TTL_S)
    await store.append("c1", "turns", turns(1), version=None, policy=POLICY)

    assert await store.hold(["c1", "nope"], LONG_S) == 1
    await timeline.elapse(TTL_S * 1.5)

    assert (await read(store)).lists == {"turns": turns(1)}


async def test_hold_never_shortens_an_expiry(store: ContextStore) -> None:
    await create(store)

    await store.hold(["c1"], TTL_S)

    assert (await read(store)).expires_in_s > TTL_S


async def test_expired_contexts_are_swept_and_held_ones_kept(
    store: ContextStore, timeline: Timeline, backend_name: str
) -> None:
    await create(store, "held", ttl_s=TTL_S)
    await create(store, "idle", ttl_s=TTL_S)
    for context_id in ("held", "idle"):
        await store.append(context_id, "turns", turns(1), version=None, policy=POLICY)
    await store.hold(["held"], LONG_S)
    swept: list[Swept] = []

    async def idle_is_gone() -> bool:
        swept.append(await store.sweep())
        return await presence(store, "idle") == "missing"

    await timeline.wait_out(TTL_S, idle_is_gone, failure="the idle context was not removed")

    assert (await read(store, "held")).lists == {"turns": turns(1)}
    removed = (sum(s.contexts for s in swept), sum(s.segments for s in swept))
    assert removed == ((1, 1) if backend_name == "memory" else (0, 0))  # Redis expires by itself


async def test_the_first_secret_stored_is_the_one_every_coordinator_gets(
    store: ContextStore, backends: Backends, settings: Settings, clock: Clock
) -> None:
    first = await store.shared_secret(b"a" * 32)

    assert await store.shared_secret(b"b" * 32) == first == b"a" * 32
    other = await open_backends(settings, clock)
    try:
        elsewhere = await other.contexts.shared_secret(b"c" * 32)
    finally:
        await other.aclose()
    assert (elsewhere == first) is backends.is_shared


@pytest.fixture
async def service(store: ContextStore, clock: Clock) -> ContextService:
    limits = Settings(
        context_max_bytes=1024,
        context_max_fields=8,
        context_segment_items=2,
        context_max_segments=2,
    )
    return await ContextService.open(store, clock, limits)


async def test_a_merge_patch_sets_merges_and_deletes_with_null(service: ContextService) -> None:
    created = await service.create(DOCUMENT)
    await service.append(created.context_id, CALLER_GRANT, "turns", [{"turn": 1}])

    written = await service.merge(
        created.context_id,
        CALLER_GRANT,
        {"product": {"name": None, "color": "蓝"}, "user": None, "turns": None, "step": 2},
        if_version=2,
    )

    assert written.version == 3
    view = await service.read(created.context_id, CALLER_GRANT)
    assert view.document == {"product": {"sku": "SKU-778", "color": "蓝"}, "step": 2}


@pytest.mark.parametrize(
    ("patch", "code"),
    [
        ({"notes": "x" * 2000}, "context_too_large"),
        ({"extra": {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}}, "too_many_fields"),
    ],
)
async def test_a_merge_past_a_limit_is_refused_and_changes_nothing(
    service: ContextService, store: ContextStore, patch: dict[str, Any], code: str
) -> None:
    created = await service.create(DOCUMENT)
    before = contents(await store.read(created.context_id, None))

    with pytest.raises((PayloadTooLarge, ValidationFailed)) as caught:
        await service.merge(created.context_id, CALLER_GRANT, patch)

    assert caught.value.code == code
    assert contents(await store.read(created.context_id, None)) == before


async def test_an_append_past_the_segment_limit_is_refused_and_changes_nothing(
    service: ContextService, store: ContextStore
) -> None:
    created = await service.create(DOCUMENT)
    await service.append(created.context_id, CALLER_GRANT, "turns", [1, 2, 3, 4])  # 2 segments
    before = contents(await store.read(created.context_id, None))

    with pytest.raises(PayloadTooLarge) as caught:
        await service.append(created.context_id, CALLER_GRANT, "turns", [5])

    assert caught.value.code == "too_many_segments"
    assert contents(await store.read(created.context_id, None)) == before
