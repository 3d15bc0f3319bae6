"""The Redis key layout: each atomic operation's keys share a slot, and the load spreads."""

from __future__ import annotations

from redis.crc import key_slot

from agent_reach.backends.redis.keys import (
    IDEMPOTENCY_SHARDS,
    apikey_key,
    idempotency_shard,
    idempotency_tag,
    join_key,
    registry_key,
)
from agent_reach.config import Settings

MASTERS = 3
SLOTS = 16384


def _slot(key: str) -> int:
    return int(key_slot(key.encode()))


def test_registry_keys_and_channel_share_one_slot() -> None:
    keys = [registry_key("ar", part) for part in ("agent:a-1", "lease:a-1", "agents", "events")]

    assert len({_slot(k) for k in keys}) == 1
    assert all(k.startswith("ar:") for k in keys)


def test_api_key_record_and_listing_share_one_slot() -> None:
    assert _slot(apikey_key("ar", "apikey", "k1")) == _slot(apikey_key("ar", "apikeys"))


def test_an_idempotency_record_shares_its_fence_counter_slot() -> None:
    for request_key in ("req-1", "caller:run-7:step-a", "ü-ß"):
        tag = idempotency_tag("ar", idempotency_shard(request_key))
        record = join_key("ar", "idem", tag, request_key)
        fences = join_key("ar", "idem-fence", tag)
        assert _slot(record) == _slot(fences)


def test_idempotency_shards_spread_evenly_over_three_masters() -> None:
    # redis-cli --cluster create gives 3 masters equal contiguous slot ranges.
    per_master = [0] * MASTERS
    for shard in range(IDEMPOTENCY_SHARDS):
        per_master[_slot(idempotency_tag("ar", shard)) * MASTERS // SLOTS] += 1

    assert min(per_master) > IDEMPOTENCY_SHARDS / MASTERS * 0.8, per_master


def test_request_keys_spread_over_the_shards() -> None:
    shards = {idempotency_shard(f"req-{n}") for n in range(5000)}

    assert len(shards) > IDEMPOTENCY_SHARDS * 0.95


def test_cluster_mode_words_of_the_original_deployment() -> None:
    assert Settings(registry_backend="redis", cluster_mode="cluster").redis_cluster is True
    standalone = Settings(registry_backend="redis", cluster_mode="standalone")
    assert (standalone.cluster_mode, standalone.redis_cluster) == (False, False)
    assert Settings(registry_backend="redis", redis_cluster=True).redis_cluster is True
