"""Task documents, cached answers and key sets in Redis: one string per item, expiring by PX.

Keys under ``<prefix>:``: ``task:<task id>``, ``answer:<key>`` and ``keyset:<name>``.
"""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis, RedisCluster

from agent_reach.backends.redis.errors import translate_errors
from agent_reach.backends.redis.keys import join_key, to_ms


class _ExpiringBlobs:
    """Bytes by name under ``<prefix>:<area>:``, each with its own expiry."""

    def __init__(self, client: Redis | RedisCluster, prefix: str, area: str) -> None:
        self._client = client
        self._prefix = prefix
        self._area = area

    @translate_errors
    async def _put(self, name: str, blob: bytes, ttl_s: float) -> None:
        await self._client.set(join_key(self._prefix, self._area, name), blob, px=to_ms(ttl_s))

    @translate_errors
    async def _get(self, name: str) -> bytes | None:
        return cast(bytes | None, await self._client.get(join_key(self._prefix, self._area, name)))


class RedisTaskStore(_ExpiringBlobs):
    """`TaskStore` on Redis."""

    def __init__(self, client: Redis | RedisCluster, prefix: str) -> None:
        super().__init__(client, prefix, "task")

    async def put(self, task_id: str, document: bytes, ttl_s: float) -> None:
        await self._put(task_id, document, ttl_s)

    async def get(self, task_id: str) -> bytes | None:
        return await self._get(task_id)


class RedisAnswerCache(_ExpiringBlobs):
    """`AnswerCache` on Redis."""

    def __init__(self, client: Redis | RedisCluster, prefix: str) -> None:
        super().__init__(client, prefix, "answer")

    async def put(self, key: str, body: bytes, ttl_s: float) -> None:
        await self._put(key, body, ttl_s)

    async def get(self, key: str) -> bytes | None:
        return await self._get(key)


class RedisKeySetStore(_ExpiringBlobs):
    """`KeySetStore` on Redis."""

    def __init__(self, client: Redis | RedisCluster, prefix: str) -> None:
        super().__init__(client, prefix, "keyset")

    async def put(self, name: str, document: bytes, ttl_s: float) -> None:
        await self._put(name, document, ttl_s)

    async def get(self, name: str) -> bytes | None:
        return await self._get(name)

    @translate_errors
    async def put_new(self, name: str, document: bytes, ttl_s: float) -> bytes:
        key = join_key(self._prefix, self._area, name)
        earlier = await self._client.set(key, document, px=to_ms(ttl_s), nx=True, get=True)
        return document if earlier is None else cast(bytes, earlier)
