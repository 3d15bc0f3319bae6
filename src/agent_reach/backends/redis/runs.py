"""Workflow runs and saved definitions in Redis.

Keys under ``<prefix>:``: ``run:<key>`` (a run's record, expiring by PX), ``runs-recent``
(a list of the newest run keys, trimmed in the script that creates a run) and
``workflow:<key>`` (a saved definition, no expiry).
"""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis

from agent_reach.backends.redis.errors import translate_errors
from agent_reach.backends.redis.keys import join_key, to_ms
from agent_reach.backends.redis.scripts import register_script


class RedisRunStore:
    """`RunStore` on Redis, shared by every coordinator using the same prefix."""

    def __init__(self, client: Redis, prefix: str) -> None:
        self._client = client
        self._prefix = prefix
        self._recent = join_key(prefix, "runs-recent")
        self._create = register_script(client, "run_create")

    @translate_errors
    async def create(self, key: str, record: bytes, ttl_s: float, *, keep_recent: int) -> bool:
        created = await self._create(
            keys=[self._run(key), self._recent], args=[record, to_ms(ttl_s), keep_recent, key]
        )
        return bool(created)

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

    def _run(self, key: str) -> str:
        return join_key(self._prefix, "run", key)


class RedisWorkflowStore:
    """`WorkflowStore` on Redis."""

    def __init__(self, client: Redis, prefix: str) -> None:
        self._client = client
        self._prefix = prefix

    @translate_errors
    async def put(self, key: str, definition: bytes) -> None:
        await self._client.set(join_key(self._prefix, "workflow", key), definition)

    @translate_errors
    async def get(self, key: str) -> bytes | None:
        return cast(bytes | None, await self._client.get(join_key(self._prefix, "workflow", key)))
