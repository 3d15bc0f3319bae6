"""The `IdempotencyStore` contract, sentence by sentence, on every backend."""

from __future__ import annotations

import asyncio

import pytest
from contract_kit import Timeline

from agent_reach.backends.bundle import Backends
from agent_reach.backends.protocols import Claim, IdempotencyStore
from agent_reach.backends.redis.idempotency import RedisIdempotencyStore

LEASE_S = 0.3  # short, so a real Redis lease runs out within the test
TTL_S = 0.3  # likewise for a completed record
LONG_S = 60.0  # a lease or ttl that does not run out during a test
FINGERPRINT = "sha256:7d865e959b2466918c9863afca942d0fb89d7c9ac0c99bafc3749504ded97730"
OTHER_FINGERPRINT = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
BODY = '{"订单": "已发货"}'.encode() + b"\x00\xff\r\n"  # any bytes, not only UTF-8 text


@pytest.fixture
def store(backends: Backends) -> IdempotencyStore:
    return backends.idempotency


async def test_the_first_claim_owns_the_key_and_a_second_claimer_finds_it_in_progress(
    store: IdempotencyStore,
) -> None:
    first = await store.claim("req-1", FINGERPRINT, LONG_S)
    second = await store.claim("req-1", FINGERPRINT, LONG_S)

    assert first.state == "claimed"
    assert first.fence > 0
    assert second == Claim("in_progress", first.fence)
    assert await store.peek("req-1") == Claim("in_progress", first.fence)


async def test_a_completed_key_replays_its_status_and_body_byte_for_byte(
    store: IdempotencyStore,
) -> None:
    owner = await store.claim("req-1", FINGERPRINT, LONG_S)

    assert await store.complete("req-1", owner.fence, 201, BODY, LONG_S) is True

    replay = Claim("completed", owner.fence, 201, BODY)
    assert await store.claim("req-1", FINGERPRINT, LONG_S) == replay
    assert await store.peek("req-1") == replay


async def test_an_empty_body_is_replayed_as_empty(store: IdempotencyStore) -> None:
    owner = await store.claim("req-1", FINGERPRINT, LONG_S)
    await store.complete("req-1", owner.fence, 204, b"", LONG_S)

    assert await store.claim("req-1", FINGERPRINT, LONG_S) == Claim(
        "completed", owner.fence, 204, b""
    )


async def test_a_different_fingerprint_is_a_mismatch_and_changes_nothing(
    store: IdempotencyStore,
) -> None:
    owner = await store.claim("req-1", FINGERPRINT, LONG_S)

    assert (await store.claim("req-1", OTHER_FINGERPRINT, LONG_S)).state == "mismatch"
    assert await store.peek("req-1") == Claim("in_progress", owner.fence)

    await store.complete("req-1", owner.fence, 200, BODY, LONG_S)

    assert (await store.claim("req-1", OTHER_FINGERPRINT, LONG_S)).state == "mismatch"
    assert await store.peek("req-1") == Claim("completed", owner.fence, 200, BODY)


async def test_release_lets_the_next_claim_own_the_key_with_a_higher_fence(
    store: IdempotencyStore,
) -> None:
    owner = await store.claim("req-1", FINGERPRINT, LONG_S)

    await store.release("req-1", owner.fence)

    assert await store.peek("req-1") is None
    next_owner = await store.claim("req-1", OTHER_FINGERPRINT, LONG_S)
    assert next_owner.state == "claimed"
    assert next_owner.fence > owner.fence


async def test_release_by_a_stale_fence_or_after_completion_keeps_the_record(
    store: IdempotencyStore,
) -> None:
    owner = await store.claim("req-1", FINGERPRINT, LONG_S)

    await store.release("req-1", owner.fence + 1000)
    assert await store.peek("req-1") == Claim("in_progress", owner.fence)

    await store.complete("req-1", owner.fence, 200, BODY, LONG_S)
    await store.release("req-1", owner.fence)
    assert await store.peek("req-1") == Claim("completed", owner.fence, 200, BODY)


async def test_a_lease_that_ran_out_is_taken_over_and_the_old_owner_cannot_complete(
    store: IdempotencyStore, timeline: Timeline
) -> None:
    old = await store.claim("req-1", FINGERPRINT, LEASE_S)
    new = old

    async def is_taken_over() -> bool:
        nonlocal new
        new = await store.claim("req-1", FINGERPRINT, LONG_S)
        return new.state == "claimed"

    await timeline.wait_out(LEASE_S, is_taken_over, failure="the ran-out lease was not taken over")

    assert new.fence > old.fence
    assert await store.complete("req-1", old.fence, 500, b"stale", LONG_S) is False
    assert await store.peek("req-1") == Claim("in_progress", new.fence)
    assert await store.complete("req-1", new.fence, 200, BODY, LONG_S) is True
    assert await store.claim("req-1", FINGERPRINT, LONG_S) == Claim(
        "completed", new.fence, 200, BODY
    )


async def test_an_owner_whose_lease_ran_out_still_completes_while_nobody_took_over(
    store: IdempotencyStore, timeline: Timeline
) -> None:
    owner = await store.claim("req-1", FINGERPRINT, LEASE_S)

    async def has_run_out() -> bool:
        return await store.peek("req-1") is None

    await timeline.wait_out(LEASE_S, has_run_out, failure="the lease never ran out")

    assert await store.complete("req-1", owner.fence, 200, BODY, LONG_S) is True
    assert await store.peek("req-1") == Claim("completed", owner.fence, 200, BODY)


async def test_fifty_concurrent_claims_of_one_key_make_exactly_one_owner(
    store: IdempotencyStore,
) -> None:
    claims = await asyncio.gather(*(store.claim("req-1", FINGERPRINT, LONG_S) for _ in range(50)))

    owners = [c for c in claims if c.state == "claimed"]
    assert len(owners) == 1
    assert [c for c in claims if c not in owners] == [Claim("in_progress", owners[0].fence)] * 49


async def test_a_completed_record_expires_after_its_ttl_and_the_key_can_run_again(
    store: IdempotencyStore, timeline: Timeline
) -> None:
    owner = await store.claim("req-1", FINGERPRINT, LONG_S)
    await store.complete("req-1", owner.fence, 200, BODY, TTL_S)

    async def has_expired() -> bool:
        return await store.peek("req-1") is None

    await timeline.wait_out(TTL_S, has_expired, failure="the completed record never expired")

    again = await store.claim("req-1", OTHER_FINGERPRINT, LONG_S)
    assert again.state == "claimed"
    assert again.fence > owner.fence


async def test_peek_of_an_unknown_key_is_none_and_claims_nothing(store: IdempotencyStore) -> None:
    assert await store.peek("req-1") is None

    assert (await store.claim("req-1", FINGERPRINT, LONG_S)).state == "claimed"


async def test_keys_are_independent(store: IdempotencyStore) -> None:
    first = await store.claim("run-7:step-a", FINGERPRINT, LONG_S)
    second = await store.claim("run-7:step-b", FINGERPRINT, LONG_S)

    assert (first.state, second.state) == ("claimed", "claimed")
    assert first.fence != second.fence


async def test_a_taken_over_key_carries_the_instances_its_old_owner_sent_it_to(
    store: IdempotencyStore, timeline: Timeline
) -> None:
    old = await store.claim("req-1", FINGERPRINT, LEASE_S)
    await store.note_sent("req-1", old.fence, "order-2")
    await store.note_sent("req-1", old.fence, "order-2")  # noted once
    await store.note_sent("req-1", old.fence + 1000, "order-9")  # not its owner: ignored
    await store.note_sent("req-1", old.fence, "order-1")
    new = old

    async def is_taken_over() -> bool:
        nonlocal new
        new = await store.claim("req-1", FINGERPRINT, LONG_S)
        return new.state == "claimed"

    await timeline.wait_out(LEASE_S, is_taken_over, failure="the ran-out lease was not taken over")

    assert new.sent_to == ("order-2", "order-1")
    assert (await store.claim("req-2", FINGERPRINT, LONG_S)).sent_to == ()


async def test_a_claim_given_back_after_reaching_an_agent_is_taken_over_with_its_instances(
    store: IdempotencyStore,
) -> None:
    owner = await store.claim("req-1", FINGERPRINT, LONG_S)
    await store.note_sent("req-1", owner.fence, "order-2")

    await store.release("req-1", owner.fence)

    assert await store.peek("req-1") is None  # free to run again ...
    assert (await store.claim("req-1", OTHER_FINGERPRINT, LONG_S)).state == "mismatch"
    again = await store.claim("req-1", FINGERPRINT, LONG_S)  # ... by the same request only
    assert (again.state, again.sent_to) == ("claimed", ("order-2",))
    assert again.fence > owner.fence


async def test_nothing_is_noted_on_a_completed_key(store: IdempotencyStore) -> None:
    owner = await store.claim("req-1", FINGERPRINT, LONG_S)
    await store.complete("req-1", owner.fence, 200, BODY, LONG_S)

    await store.note_sent("req-1", owner.fence, "order-2")
    await store.release("req-1", owner.fence)

    assert await store.claim("req-1", FINGERPRINT, LONG_S) == Claim(
        "completed", owner.fence, 200, BODY
    )


@pytest.mark.parametrize(  # the memory store's calls have no connection to lose
    "backend_name",
    [
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("redis-cluster", marks=[pytest.mark.redis, pytest.mark.redis_cluster]),
    ],
)
async def test_a_claim_sent_again_by_the_redis_client_is_still_its_own(
    backends: Backends,
) -> None:
    """The client re-sends a script when a dropped connection lost its answer: the same
    claim, run twice, owns the key both times, and any other claimer still finds it taken."""
    store = backends.idempotency
    assert isinstance(store, RedisIdempotencyStore)
    call = store.claim_call("req-resent", FINGERPRINT, LONG_S)

    first, again = await call(), await call()

    assert first.state == "claimed"
    assert again == Claim("claimed", first.fence)
    assert await store.claim("req-resent", FINGERPRINT, LONG_S) == Claim("in_progress", first.fence)
