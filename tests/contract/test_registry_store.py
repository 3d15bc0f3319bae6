"""The `RegistryStore` contract, sentence by sentence, on every backend."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import get_args

import pytest
from contract_kit import RedisOutage, Timeline, assert_unavailable, once_answering

from agent_reach.backends.bundle import Backends
from agent_reach.backends.protocols import (
    InstanceRecord,
    LeasedRecord,
    RegistryEvent,
    RegistryStore,
)
from agent_reach.backends.selection import open_backends
from agent_reach.clock import SYSTEM_CLOCK, Clock
from agent_reach.config import Settings
from agent_reach.errors import StoreUnavailable
from agent_reach.model.agents import AgentSpec, HealthStatus, TransportSpec

LEASE_SLACK_S = 5.0  # a real lease may tick down this much between the call and the check
WATCH_DEADLINE_S = 15.0  # generous: covers the watcher's reconnect backoff after an outage
PROBE_WAIT_S = 0.2  # how long one probe waits for its event before the next probe


@dataclass
class Leases:
    """Reads leases through `load` and lets them run down: a manual clock moves, else we wait."""

    store: RegistryStore
    timeline: Timeline

    async def get(self, agent_id: str) -> LeasedRecord | None:
        """What `load` says about one id."""
        return next((r for r in await self.store.load() if r.record.spec.id == agent_id), None)

    async def run_down(self, agent_id: str, left_s: float) -> None:
        """Return once the lease of `agent_id` has `left_s` seconds or less to go."""
        current = await self.get(agent_id)
        assert current is not None, f"{agent_id} is not stored"

        async def has_run_down() -> bool:
            leased = await self.get(agent_id)
            return leased is not None and leased.lease_left_s <= left_s

        await self.timeline.wait_out(
            current.lease_left_s - left_s,
            has_run_down,
            failure=f"the lease of {agent_id} never ran down to {left_s} s",
        )


@pytest.fixture
def leases(store: RegistryStore, timeline: Timeline) -> Leases:
    return Leases(store, timeline)


def make_record(
    agent_id: str = "product-assistant-01", *, ttl: float = 60.0, description: str = "商品问答"
) -> InstanceRecord:
    spec = AgentSpec(
        id=agent_id,
        display_name="商品助手",
        capabilities=["product.query", "inventory.check"],
        description=description,
        examples=["这款手机有蓝色256G吗"],
        transport=TransportSpec(endpoint="http://127.0.0.1:9040/invoke"),
        ttl=ttl,
    )
    return InstanceRecord(spec=spec, registered_at=1_700_000_000.25)


async def test_put_then_load_returns_the_record_with_a_full_lease(
    store: RegistryStore, leases: Leases
) -> None:
    record = make_record(ttl=60)
    await store.put(record, "node-a")

    leased = await leases.get(record.spec.id)

    assert leased is not None
    assert leased.record == record
    assert 60 - LEASE_SLACK_S < leased.lease_left_s <= 60


async def test_put_again_replaces_the_spec_and_restarts_the_lease(
    store: RegistryStore, leases: Leases
) -> None:
    first = make_record(ttl=1, description="旧的描述")
    await store.put(first, "node-a")
    await leases.run_down(first.spec.id, 0)

    second = make_record(ttl=60, description="新的描述")
    await store.put(second, "node-a")

    stored = [r for r in await store.load() if r.record.spec.id == second.spec.id]
    assert [r.record for r in stored] == [second]
    assert 60 - LEASE_SLACK_S < stored[0].lease_left_s <= 60
    assert await store.renew(second.spec.id, "node-a") == 60


async def test_renew_extends_a_live_lease_and_returns_its_ttl(
    store: RegistryStore, leases: Leases
) -> None:
    record = make_record(ttl=2)
    await store.put(record, "node-a")
    await leases.run_down(record.spec.id, 1.0)

    assert await store.renew(record.spec.id, "node-a") == 2

    leased = await leases.get(record.spec.id)
    assert leased is not None
    assert leased.lease_left_s > 1.0


async def test_renew_of_an_unknown_id_returns_none(store: RegistryStore) -> None:
    assert await store.renew("never-registered", "node-a") is None


async def test_renew_after_the_lease_ran_out_returns_none_and_changes_nothing(
    store: RegistryStore, leases: Leases
) -> None:
    record = make_record(ttl=1)
    await store.put(record, "node-a")
    await leases.run_down(record.spec.id, 0)

    assert await store.renew(record.spec.id, "node-a") is None

    leased = await leases.get(record.spec.id)
    assert leased is not None
    assert leased.lease_left_s == 0


async def test_record_stays_listed_with_no_lease_left_after_its_lease_ran_out(
    store: RegistryStore, leases: Leases
) -> None:
    record = make_record(ttl=1)
    await store.put(record, "node-a")

    await leases.run_down(record.spec.id, 0)

    leased = await leases.get(record.spec.id)
    assert leased is not None
    assert leased.record == record
    assert leased.lease_left_s == 0


async def test_remove_returns_true_then_false(store: RegistryStore) -> None:
    record = make_record()
    await store.put(record, "node-a")

    assert await store.remove(record.spec.id, "node-a") is True
    assert await store.remove(record.spec.id, "node-a") is False


async def test_load_after_remove_lacks_the_record_and_renew_finds_nothing(
    store: RegistryStore,
) -> None:
    kept, removed = make_record("kept-01"), make_record("removed-01")
    await store.put(kept, "node-a")
    await store.put(removed, "node-a")

    await store.remove(removed.spec.id, "node-a")

    assert [r.record.spec.id for r in await store.load()] == ["kept-01"]
    assert await store.renew(removed.spec.id, "node-a") is None


async def test_version_changes_when_a_record_is_stored_or_removed_and_only_then(
    store: RegistryStore,
) -> None:
    assert await store.version() == 0  # a store with nothing stored yet
    record = make_record("versioned-01")
    seen = [await store.version()]

    await store.put(record, "node-a")
    seen.append(await store.version())
    await store.put(record, "node-a")  # stored again: news too (the spec may differ)
    seen.append(await store.version())
    assert len(set(seen)) == 3

    await store.renew(record.spec.id, "node-a")
    await store.load()
    await store.get(record.spec.id)
    assert await store.remove("nobody-01", "node-a") is False
    assert await store.version() == seen[-1]  # nothing stored or removed

    assert await store.remove(record.spec.id, "node-a") is True
    assert await store.version() not in seen


async def test_load_lists_many_records(store: RegistryStore) -> None:
    records = [make_record(f"agent-{n:03d}") for n in range(500)]
    await asyncio.gather(*(store.put(r, "node-a") for r in records))

    loaded = {r.record.spec.id: r.record for r in await store.load()}

    assert loaded == {r.spec.id: r for r in records}


async def test_chinese_names_and_descriptions_round_trip_exactly(
    store: RegistryStore, leases: Leases
) -> None:
    spec = AgentSpec.model_validate(
        {
            "id": "order-assistant-01",
            "display_name": "订单助手 🚚",
            "capabilities": ["order.track"],
            "description": "物流查询：「我买的东西怎么还没到」、退换货，全角ＡＢＣ１２３",
            "examples": ["我买的东西怎么还没到", "帮我查一下快递"],
            "transport": {"type": "http", "endpoint": "http://127.0.0.1:9041/invoke"},
            "owner": "客服团队",
        }
    )
    record = InstanceRecord(spec=spec, registered_at=1_700_000_123.5)
    await store.put(record, "节点-甲")

    leased = await leases.get(spec.id)

    assert leased is not None
    assert leased.record == record
    assert leased.record.spec.model_dump() == spec.model_dump()


async def next_event_for(
    events: asyncio.Queue[RegistryEvent], agent_id: str, timeout_s: float
) -> RegistryEvent:
    """The next event about `agent_id`; `TimeoutError` when none comes in time."""
    async with asyncio.timeout(timeout_s):
        while True:
            event = await events.get()
            if event.agent_id == agent_id:
                return event


async def expect_event(events: asyncio.Queue[RegistryEvent], agent_id: str) -> RegistryEvent:
    try:
        return await next_event_for(events, agent_id, WATCH_DEADLINE_S)
    except TimeoutError:
        pytest.fail(f"no event about {agent_id} reached the watcher within {WATCH_DEADLINE_S} s")


async def wait_until_watching(events: asyncio.Queue[RegistryEvent], writer: RegistryStore) -> None:
    """Put a probe record until the watcher reports it: from then on no change is missed."""
    probe = make_record("watch-probe")
    deadline = SYSTEM_CLOCK.monotonic() + WATCH_DEADLINE_S
    while SYSTEM_CLOCK.monotonic() < deadline:
        with contextlib.suppress(StoreUnavailable):
            await writer.put(probe, "probe")
        with contextlib.suppress(TimeoutError):
            await next_event_for(events, probe.spec.id, PROBE_WAIT_S)
            return
    pytest.fail(f"the watcher reported no change within {WATCH_DEADLINE_S} s")


@contextlib.asynccontextmanager
async def watching(
    store: RegistryStore, events: asyncio.Queue[RegistryEvent], *, is_async: bool
) -> AsyncIterator[asyncio.Task[None]]:
    """Run `store.watch` feeding `events` (through a sync or an async listener); cancel after."""

    async def put_async(event: RegistryEvent) -> None:
        await events.put(event)

    task = asyncio.create_task(store.watch(put_async if is_async else events.put_nowait))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_watch_delivers_changes_made_by_another_store_or_returns_when_not_shared(
    backends: Backends, settings: Settings, clock: Clock
) -> None:
    events: asyncio.Queue[RegistryEvent] = asyncio.Queue()
    if not backends.is_shared:
        async with asyncio.timeout(WATCH_DEADLINE_S):
            await backends.registry.watch(events.put_nowait)
        assert events.empty()
        return

    other = await open_backends(settings, clock)
    try:
        async with watching(backends.registry, events, is_async=True) as task:
            await wait_until_watching(events, other.registry)
            record = make_record(ttl=60)
            await other.registry.put(record, "node-b")
            await other.registry.renew(record.spec.id, "node-b")
            await other.registry.remove(record.spec.id, "node-b")

            put = await expect_event(events, record.spec.id)
            renew = await expect_event(events, record.spec.id)
            remove = await expect_event(events, record.spec.id)
            assert not task.done(), "watch returned before it was cancelled"
    finally:
        await other.aclose()

    assert task.cancelled()
    assert (put.op, put.origin, put.record, put.lease_left_s) == ("put", "node-b", record, 60)
    assert (renew.op, renew.origin, renew.record, renew.lease_left_s) == (
        "renew",
        "node-b",
        None,
        60,
    )
    assert (remove.op, remove.origin, remove.record) == ("remove", "node-b", None)


@pytest.mark.parametrize("health", get_args(HealthStatus))  # `unknown` too, as listed
async def test_health_announced_by_one_store_reaches_another_stores_watch_and_stores_nothing(
    backends: Backends, settings: Settings, clock: Clock, health: HealthStatus
) -> None:
    if not backends.is_shared:
        await backends.registry.announce_health("product-assistant-01", health, "node-a")
        assert await backends.registry.load() == []
        return

    events: asyncio.Queue[RegistryEvent] = asyncio.Queue()
    other = await open_backends(settings, clock)
    try:
        async with watching(backends.registry, events, is_async=False):
            await wait_until_watching(events, other.registry)
            await other.registry.announce_health("product-assistant-01", health, "node-b")

            event = await expect_event(events, "product-assistant-01")
    finally:
        await other.aclose()

    assert (event.op, event.origin, event.health, event.record) == (
        "health",
        "node-b",
        health,
        None,
    )
    assert [r.record.spec.id for r in await backends.registry.load()] == ["watch-probe"]


# Redis outages: a private server that the tests stop, restart and freeze.


@pytest.mark.redis
async def test_store_fails_fast_while_redis_is_down_and_works_again_after_restart(
    outage: RedisOutage,
) -> None:
    store = outage.backends.registry
    record = make_record()
    await store.put(record, "node-a")

    await outage.stop()
    await assert_unavailable(store.put(record, "node-a"))
    await assert_unavailable(store.renew(record.spec.id, "node-a"))
    await assert_unavailable(store.remove(record.spec.id, "node-a"))
    await assert_unavailable(store.load())
    await assert_unavailable(store.announce_health(record.spec.id, "offline", "node-a"))

    await outage.start()
    await once_answering(lambda: store.put(record, "node-a"))
    assert [r.record for r in await store.load()] == [record]


@pytest.mark.redis
async def test_store_times_out_while_redis_is_frozen_and_works_again_after_resume(
    outage: RedisOutage,
) -> None:
    store = outage.backends.registry
    record = make_record()

    outage.server.pause()
    error = await assert_unavailable(store.put(record, "node-a"))
    assert error.message == "redis did not answer in time"

    outage.server.resume()
    await store.put(record, "node-a")
    assert [r.record for r in await store.load()] == [record]


@pytest.mark.redis
async def test_opening_a_redis_that_is_down_raises_store_unavailable(
    outage: RedisOutage,
) -> None:
    await outage.stop()

    await assert_unavailable(open_backends(outage.settings, SYSTEM_CLOCK))


@pytest.mark.redis
async def test_watch_follows_changes_again_after_redis_restarts(outage: RedisOutage) -> None:
    events: asyncio.Queue[RegistryEvent] = asyncio.Queue()
    writer = await open_backends(outage.settings, SYSTEM_CLOCK)
    try:
        async with watching(outage.backends.registry, events, is_async=False) as task:
            await wait_until_watching(events, writer.registry)

            await outage.stop()
            await outage.start()
            await wait_until_watching(events, writer.registry)

            record = make_record()
            await writer.registry.put(record, "node-b")
            assert (await expect_event(events, record.spec.id)).record == record
            assert not task.done(), "watch returned instead of reconnecting"
    finally:
        await writer.aclose()


async def test_get_reads_one_record_with_its_owner_from_the_store(store: RegistryStore) -> None:
    record = make_record()
    owned = InstanceRecord(record.spec, record.registered_at, owner="inventory-team")
    await store.put(owned, "node-a")
    assert await store.get("product-assistant-01") == owned
    assert await store.get("nobody") is None
    await store.remove("product-assistant-01", "node-a")
    assert await store.get("product-assistant-01") is None
