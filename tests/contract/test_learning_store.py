"""The `LearningStore` contract on every backend: routed texts and bounded learned examples."""

from __future__ import annotations

import pytest
from contract_kit import Timeline

from agent_reach.backends.bundle import Backends
from agent_reach.backends.protocols import LearningStore

TTL_S = 0.3  # short, so a real Redis expiry runs out within the test
LONG_S = 60.0
TEXT = '{"text": "帮我查一下订单 888 的状态"}'.encode()


@pytest.fixture
def store(backends: Backends) -> LearningStore:
    return backends.learning


async def test_a_routed_text_is_kept_for_its_ttl_then_forgotten(
    store: LearningStore, timeline: Timeline
) -> None:
    await store.put_text("req-1", TEXT, TTL_S)
    await store.put_text("req-2", TEXT, LONG_S)
    assert await store.get_text("req-1") == TEXT
    assert await store.get_text("never") is None

    async def has_expired() -> bool:
        return await store.get_text("req-1") is None

    await timeline.wait_out(TTL_S, has_expired, failure="the routed text never expired")
    assert await store.get_text("req-2") == TEXT


async def test_adding_an_example_changes_the_version_and_lists_it(store: LearningStore) -> None:
    before = await store.version()
    await store.add_example("e1", "order.query", b"one", ttl_s=LONG_S, keep=10)
    assert await store.version() != before
    assert await store.examples() == [b"one"]


async def test_the_same_id_replaces_its_example(store: LearningStore) -> None:
    await store.add_example("e1", "order.query", b"old", ttl_s=LONG_S, keep=10)
    await store.add_example("e1", "order.query", b"new", ttl_s=LONG_S, keep=10)
    assert await store.examples() == [b"new"]


async def test_a_capability_keeps_only_its_newest_examples(store: LearningStore) -> None:
    for n in range(5):
        await store.add_example(f"o{n}", "order.query", f"o{n}".encode(), ttl_s=LONG_S, keep=3)
    await store.add_example("p0", "parcel.track", b"p0", ttl_s=LONG_S, keep=3)
    assert sorted(await store.examples()) == [b"o2", b"o3", b"o4", b"p0"]


async def test_an_example_expires_after_its_ttl(store: LearningStore, timeline: Timeline) -> None:
    await store.add_example("short", "order.query", b"short", ttl_s=TTL_S, keep=10)
    await store.add_example("long", "order.query", b"long", ttl_s=LONG_S, keep=10)

    async def has_expired() -> bool:
        return await store.examples() == [b"long"]

    await timeline.wait_out(TTL_S, has_expired, failure="the learned example never expired")


async def test_delete_forgets_one_example_and_changes_the_version(store: LearningStore) -> None:
    await store.add_example("e1", "order.query", b"one", ttl_s=LONG_S, keep=10)
    await store.add_example("e2", "order.query", b"two", ttl_s=LONG_S, keep=10)
    version = await store.version()
    assert await store.delete_example("e1") is True
    assert await store.version() != version
    assert await store.examples() == [b"two"]
    assert await store.delete_example("e1") is False
    assert await store.delete_example("never") is False
