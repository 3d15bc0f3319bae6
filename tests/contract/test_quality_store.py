"""The `QualityStore` contract on every backend: counter buckets, served requests, ratings."""

from __future__ import annotations

from contract_kit import Timeline

from agent_reach.backends.bundle import Backends

TTL_S = 0.3


async def test_counts_add_up_per_field_over_the_buckets_asked(backends: Backends) -> None:
    store = backends.quality
    await store.add("w60", 10, {"completed\ta-1": 2, "bounced\ta-2": 1}, 60)
    await store.add("w60", 10, {"completed\ta-1": 3}, 60)
    await store.add("w60", 11, {"bounced\ta-2": 4, "bad\ta-1": 1}, 60)
    await store.add("w60", 12, {"completed\ta-1": 100}, 60)
    await store.add("w30", 11, {"completed\ta-1": 7}, 60)  # another series: apart
    assert await store.totals("w60", [10, 11]) == {
        "completed\ta-1": 5,
        "bounced\ta-2": 5,
        "bad\ta-1": 1,
    }
    assert await store.totals("w60", [9]) == {}
    assert await store.totals("w30", [10, 11, 12]) == {"completed\ta-1": 7}


async def test_a_bucket_expires_after_its_last_write(
    backends: Backends, timeline: Timeline
) -> None:
    store = backends.quality
    await store.add("short", 1, {"failed\ta-1": 1}, TTL_S)
    assert await store.totals("short", [1]) == {"failed\ta-1": 1}

    async def gone() -> bool:
        return await store.totals("short", [1]) == {}

    await timeline.wait_out(TTL_S, gone, failure="the bucket outlived its ttl")


async def test_a_served_request_is_kept_for_its_ttl(backends: Backends, timeline: Timeline) -> None:
    store = backends.quality
    await store.put_served([("r-1", b'{"agent_id": "a-1"}'), ("r-2", b"{}")], TTL_S)
    assert await store.served("r-1") == b'{"agent_id": "a-1"}'
    assert await store.served("r-2") == b"{}"
    assert await store.served("r-3") is None

    async def gone() -> bool:
        return await store.served("r-1") is None

    await timeline.wait_out(TTL_S, gone, failure="the served record outlived its ttl")


async def test_a_request_is_rated_once(backends: Backends) -> None:
    store = backends.quality
    assert await store.claim_rating("r-1", 60) is True
    assert await store.claim_rating("r-1", 60) is False
    assert await store.claim_rating("r-2", 60) is True
