"""The `LivenessStore` contract, and the takeovers it allows in the idempotency and queue
stores, on every backend (memory, Redis, Redis Cluster)."""

from __future__ import annotations

from contract_kit import Timeline

from agent_reach.backends.bundle import Backends

TTL_S = 0.4  # short, so a real Redis record runs out within the test
LONG_S = 60.0  # a ttl, lease or stale time that does not run out during a test
FINGERPRINT = "sha256:liveness-contract"


async def test_a_beating_node_is_never_dead_and_a_silent_one_is_once_its_record_runs_out(
    backends: Backends, timeline: Timeline
) -> None:
    liveness = backends.liveness
    assert await liveness.beat("node-a", TTL_S) == frozenset()
    assert await liveness.beat("node-b", LONG_S) == frozenset()

    async def a_is_dead() -> bool:
        return "node-a" in await liveness.beat("node-b", LONG_S)

    await timeline.wait_out(TTL_S + 0.05, a_is_dead, failure="a silent node is still alive")
    assert "node-b" not in await liveness.beat("node-b", LONG_S)
    # Beating again revives it.
    assert "node-a" not in await liveness.beat("node-a", LONG_S)
    assert await liveness.beat("node-b", LONG_S) == frozenset()


async def test_a_claim_held_by_a_dead_node_is_taken_over_at_once_with_its_instances(
    backends: Backends,
) -> None:
    store = backends.idempotency
    first = await store.claim("k-dead", FINGERPRINT, LONG_S, node="node-a")
    assert first.state == "claimed"
    await store.note_sent("k-dead", first.fence, "agent-1")

    held = await store.claim("k-dead", FINGERPRINT, LONG_S, node="node-b")
    assert (held.state, held.node) == ("in_progress", "node-a")
    # Naming another node as dead changes nothing; naming its holder takes it over.
    other = await store.claim("k-dead", FINGERPRINT, LONG_S, node="node-b", takeover_from="x")
    assert other.state == "in_progress"
    taken = await store.claim("k-dead", FINGERPRINT, LONG_S, node="node-b", takeover_from="node-a")
    assert taken.state == "claimed" and taken.fence > first.fence
    assert taken.sent_to == ("agent-1",)
    assert not await store.complete("k-dead", first.fence, 200, b"late", LONG_S)
    peeked = await store.peek("k-dead")
    assert peeked is not None and (peeked.state, peeked.node) == ("in_progress", "node-b")


async def test_a_claim_given_back_with_forget_leaves_nothing_behind(backends: Backends) -> None:
    store = backends.idempotency
    claim = await store.claim("k-forget", FINGERPRINT, LONG_S, node="node-a")
    await store.note_sent("k-forget", claim.fence, "agent-1")
    await store.release("k-forget", claim.fence, forget=True)
    assert await store.peek("k-forget") is None
    again = await store.claim("k-forget", FINGERPRINT, LONG_S, node="node-a")
    assert again.state == "claimed" and again.sent_to == ()


async def test_a_dead_consumers_entries_go_to_another_consumer_at_once(backends: Backends) -> None:
    queues = backends.queues
    entry_id = await queues.push("work", b"task-1")
    pulled = await queues.pull("work", "node-a", count=1, block_s=0, stale_s=LONG_S)
    assert [e for e, _ in pulled] == [entry_id]
    kept = await queues.pull("work", "node-b", count=1, block_s=0, stale_s=LONG_S, dead=["x"])
    assert kept == []
    taken = await queues.pull("work", "node-b", count=1, block_s=0, stale_s=LONG_S, dead=["node-a"])
    assert taken == [(entry_id, b"task-1")]
