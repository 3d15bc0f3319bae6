"""The shared `why` records in Redis: one list per request id.

Key under ``<prefix>:``: ``why:<request id>``, a list of records, oldest first, trimmed
to the newest `cap` and expiring `ttl_s` after its last write. A single-key store: no
hash tag, so the lists spread over every master of a cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from redis.asyncio import Redis, RedisCluster

from agent_reach.backends.redis.errors import translate_errors
from agent_reach.backends.redis.keys import join_key, to_ms


class RedisWhyStore:
    """`WhyStore` on Redis lists."""

    def __init__(self, client: Redis | RedisCluster, prefix: str) -> None:
        self._client = client
        self._prefix = prefix

    @translate_errors
    async def add(self, records: Sequence[tuple[str, bytes]], cap: int, ttl_s: float) -> None:
        if not records:
            return
        ttl_ms = to_ms(ttl_s)
        async with self._client.pipeline(transaction=False) as pipe:
            for request_id, record in records:
                key = self._key(request_id)
                pipe.rpush(key, record)
                pipe.ltrim(key, -cap, -1)
                pipe.pexpire(key, ttl_ms)
            await pipe.execute()

    @translate_errors
    async def get(self, request_id: str) -> list[bytes]:
        return cast(list[bytes], await self._client.lrange(self._key(request_id), 0, -1))

    def _key(self, request_id: str) -> str:
        return join_key(self._prefix, "why", request_id)
