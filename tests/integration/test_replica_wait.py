"""AR_REDIS_WAIT_REPLICAS: idempotency claims and answers wait until a replica has them."""

from __future__ import annotations

import pytest
import redis
import redis.asyncio

from agent_reach.backends.redis.keys import idempotency_shard, idempotency_tag, join_key
from agent_reach.backends.redis.replication import ReplicaWait
from agent_reach.backends.redis.scripts import register_script
from agent_reach.backends.selection import open_backends
from agent_reach.clock import SYSTEM_CLOCK
from agent_reach.config import Settings
from agent_reach.testing.redis_cluster import RedisClusterServer
from agent_reach.testing.redis_server import RedisServer

FINGERPRINT = "f" * 64


def _waits(node: redis.Redis) -> int:
    return int(node.info("commandstats").get("cmdstat_wait", {}).get("calls", 0))


@pytest.mark.redis
@pytest.mark.redis_cluster
async def test_claim_and_answer_are_on_the_replica_when_they_return(
    redis_cluster: RedisClusterServer, redis_cluster_prefix: str
) -> None:
    settings = Settings(
        registry_backend="redis",
        redis_cluster=True,
        redis_url=redis_cluster.url,
        redis_prefix=redis_cluster_prefix,
        redis_wait_replicas=1,
    )
    request_key, shard = "caller:req-1", idempotency_shard("caller:req-1")
    # A first request in the same shard (so on the same master) loads the scripts there.
    warm_up = next(k for n in range(10_000) if idempotency_shard(k := f"w-{n}") == shard)
    record = join_key(
        redis_cluster_prefix, "idem", idempotency_tag(redis_cluster_prefix, shard), request_key
    )
    master = redis_cluster.master_of(record)
    replica = redis_cluster.replica_of(master)
    on_master, on_replica = redis.Redis(port=master.port), redis.Redis(port=replica.port)
    backends = await open_backends(settings, SYSTEM_CLOCK)
    try:
        first = await backends.idempotency.claim(warm_up, FINGERPRINT, 30.0)
        await backends.idempotency.complete(warm_up, first.fence, 200, b"{}", 60.0)
        waits_before = _waits(on_master)
        claim = await backends.idempotency.claim(request_key, FINGERPRINT, 30.0)
        on_replica.execute_command("READONLY")
        claimed_there = on_replica.hget(record, "fence")
        assert await backends.idempotency.complete(request_key, claim.fence, 200, b"{}", 60.0)
        answered_there = on_replica.hget(record, "status")
    finally:
        await backends.aclose()

    assert claim.state == "claimed"
    assert claimed_there == str(claim.fence).encode()
    assert answered_there == b"200"
    assert _waits(on_master) - waits_before == 2  # claim and answer, each followed by WAIT
    on_master.close()
    on_replica.close()


@pytest.mark.redis
async def test_a_write_no_replica_confirms_still_returns_and_is_counted() -> None:
    with RedisServer() as server:  # a single Redis: no replica will ever confirm
        client = redis.asyncio.Redis(port=server.port)
        wait = ReplicaWait(client, replicas=1, timeout_ms=20, timeout_s=1.0)
        script = register_script(client, "idempotency_release")
        try:
            reply = await wait.run(script, ["x:idem:{t}:k"], ["1"])
        finally:
            await wait.aclose()
            await client.aclose()

    assert reply == 0  # the script ran (nothing to release) and its answer came back
    assert wait.unconfirmed == 1
