"""The outcome ledger in Redis, shared by every coordinator.

Keys under ``<prefix>:``: ``quality:<series>:<bucket>`` (a hash: field -> count, expiring
after the window), ``served:<request id>`` (what served a request, for its ratings) and
``rated:<request id>`` (set once, when the request is rated). Single-key operations,
pipelined: no hash tag, so they spread over every master of a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from redis.asyncio import Redis, RedisCluster

from agent_reach.backends.redis.errors import translate_errors
from agent_reach.backends.redis.keys import join_key, to_ms


class RedisQualityStore:
    """`QualityStore` on Redis hashes and strings."""

    def __init__(self, client: Redis | RedisCluster, prefix: str) -> None:
        self._client = client
        self._prefix = prefix

    @translate_errors
    async def add(self, series: str, bucket: int, counts: Mapping[str, int], ttl_s: float) -> None:
        if not counts:
            return
        key = join_key(self._prefix, "quality", series, str(bucket))
        async with self._client.pipeline(transaction=False) as pipe:
            for field, n in counts.items():
                pipe.hincrby(key, field, n)
            pipe.pexpire(key, to_ms(ttl_s))
            await pipe.execute()

    @translate_errors
    async def totals(self, series: str, buckets: Sequence[int]) -> dict[str, int]:
        async with self._client.pipeline(transaction=False) as pipe:
            for bucket in buckets:
                pipe.hgetall(join_key(self._prefix, "quality", series, str(bucket)))
            found = cast(list[dict[bytes, bytes]], await pipe.execute())
        total: dict[str, int] = {}
        for counts in found:
            for field, n in counts.items():
                name = field.decode()
                total[name] = total.get(name, 0) + int(n)
        return total

    @translate_errors
    async def put_served(self, records: Sequence[tuple[str, bytes]], ttl_s: float) -> None:
        if not records:
            return
        ttl_ms = to_ms(ttl_s)
        async with self._client.pipeline(transaction=False) as pipe:
            for request_id, record in records:
                pipe.set(join_key(self._prefix, "served", request_id), record, px=ttl_ms)
            await pipe.execute()

    @translate_errors
    async def served(self, request_id: str) -> bytes | None:
        found = await self._client.get(join_key(self._prefix, "served", request_id))
        return cast(bytes | None, found)

    @translate_errors
    async def claim_rating(self, request_id: str, ttl_s: float) -> bool:
        key = join_key(self._prefix, "rated", request_id)
        return bool(await self._client.set(key, b"1", px=to_ms(ttl_s), nx=True))
