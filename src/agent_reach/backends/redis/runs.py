"""Workflow runs and saved definitions in Redis.

Keys under ``<prefix>:``: ``run:<key>`` (a run's record, expiring by PX),
``run-cancel:<key>`` (the mark of a cancelled run, expiring with it), ``runs-recent`` (a
list of the newest run keys, trimmed as runs are created) and ``workflow:<key>`` (a saved
definition, no expiry). Every operation touches one key, so runs spread over a Redis
Cluster's masters: a run is created by `SET NX` and listed after, and a creator that dies
in between leaves a run that is only missing from the recent list.
"""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis, RedisCluster

from agent_reach.backends.redis.errors import translate_errors
from agent_reach.backends.redis.keys import join_key, to_ms


class RedisRunStore:
    """`RunStore` on Redis, shared by every coordinator using the same prefix."""

    def __init__(self, client: Redis | RedisCluster, prefix: str) -> None:
        self._client = client
        self._prefix = prefix
        self._recent = join_key(prefix, "runs-recent")

    @translate_errors
    async def create(self, key: str, record: bytes, ttl_s: float, *, keep_recent: int) -> bool:
        if not await self._client.set(self._run(key), record, px=to_ms(ttl_s), nx=True):
            return False
        async with self._client.pipeline(transaction=True) as listing:  # one key: one slot
            listing.lpush(self._recent, key)
            listing.ltrim(self._recent, 0, keep_recent - 1)
            await listing.execute()
        return True

    @translate_errors
    async def put(self, key: str, record: bytes, ttl_s: float) -> None:
        await self._client.set(self._run(key), record, px=to_ms(ttl_s))

    @translate_errors
    async def get(self, key: str) -> bytes | None:
        return cast(bytes | None, await self._client.get(self._run(key)))

    @translate_errors
    async def recent(self, limit: int) -> list[str]:
        if limit <= 0:
            return []
        keys = cast(list[bytes], await self._client.lrange(self._recent, 0, limit - 1))
        return [key.decode() for key in keys]

    @translate_errors
    async def cancel(self, key: str, ttl_s: float) -> bool:
        marked = await self._client.set(self._cancel(key), b"1", px=to_ms(ttl_s), nx=True)
        return bool(marked)

    @translate_errors
    async def is_cancelled(self, key: str) -> bool:
        return bool(await self._client.exists(self._cancel(key)))

    def _run(self, key: str) -> str:
        return join_key(self._prefix, "run", key)

    def _cancel(self, key: str) -> str:
        return join_key(self._prefix, "run-cancel", key)


class RedisWorkflowStore:
    """`WorkflowStore` on Redis."""

    def __init__(self, client: Redis | RedisCluster, prefix: str) -> None:
        self._client = client
        self._prefix = prefix

    @translate_errors
    async def put(self, key: str, definition: bytes) -> None:
        await self._client.set(join_key(self._prefix, "workflow", key), definition)

    @translate_errors
    async def get(self, key: str) -> bytes | None:
        return cast(bytes | None, await self._client.get(join_key(self._prefix, "workflow", key)))
