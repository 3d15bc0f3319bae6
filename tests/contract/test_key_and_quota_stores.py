"""KeyStore and QuotaStore contracts, on every backend."""

from __future__ import annotations

import asyncio

from contract_kit import Timeline

from agent_reach.backends.bundle import Backends
from agent_reach.backends.memory.quotas import MemoryQuotaStore
from agent_reach.clock import ManualClock
from agent_reach.security.keys import mint_key


async def test_key_records_round_trip_and_revocation_keeps_them(backends: Backends):
    _, first = mint_key("order-bot", "customer-service", "caller", 1.5)
    _, second = mint_key("inventory-01", "warehouse", "agent", 2.5)
    await backends.keys.put(first)
    await backends.keys.put(second)
    assert await backends.keys.get(first.key_id) == first
    assert await backends.keys.get("0" * 16) is None
    assert await backends.keys.revoke(first.key_id) is True
    assert await backends.keys.revoke("0" * 16) is False
    revoked = await backends.keys.get(first.key_id)
    assert revoked is not None and revoked.revoked and revoked.digest == first.digest
    listed = {r.key_id: r for r in await backends.keys.list()}
    assert set(listed) == {first.key_id, second.key_id}
    assert listed[second.key_id] == second


async def test_a_key_record_keeps_its_grants_and_may_have_no_domain(backends: Backends):
    _, record = mint_key("order-bot", None, "caller", 3.5, ("order.*", "faq.answer"))
    await backends.keys.put(record)
    stored = await backends.keys.get(record.key_id)
    assert stored == record
    assert stored.domain is None and stored.capabilities == ("order.*", "faq.answer")


async def test_a_bucket_admits_its_burst_then_says_how_long_to_wait(backends: Backends):
    waits = [await backends.quotas.take("caller:cap", 1.0, 3) for _ in range(5)]
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert all(0 < w <= 1.0 for w in waits[3:])
    assert await backends.quotas.take("other:cap", 1.0, 3) == 0.0  # buckets are separate


async def test_concurrent_takes_never_over_admit(backends: Backends):
    waits = await asyncio.gather(*(backends.quotas.take("hot", 0.001, 20) for _ in range(200)))
    assert sum(1 for w in waits if w == 0) == 20


async def test_a_bucket_refills_at_its_rate(backends: Backends, timeline: Timeline):
    for _ in range(2):
        await backends.quotas.take("refill", 10.0, 2)
    assert await backends.quotas.take("refill", 10.0, 2) > 0

    async def refilled() -> bool:
        return await backends.quotas.take("refill", 10.0, 2) == 0.0

    await timeline.wait_out(0.2, refilled, failure="the bucket did not refill")


async def test_memory_bucket_never_exceeds_its_burst():
    clock = ManualClock()
    store = MemoryQuotaStore(clock)
    clock.advance(3600)
    waits = [await store.take("k", 100.0, 2) for _ in range(3)]
    assert waits[:2] == [0.0, 0.0] and waits[2] > 0
