"""The A2A face's tasks and push configs in Redis (`A2AStore`).

Keys under ``<prefix>:``, with ``<o>`` a digest of the owner (any principal name, braces
included, makes a usable tag): ``a2a:{<p>:a2a:<o>}:task:<id>`` (a string, PX),
``...:tasks`` (sorted set: task id by creation time) and ``...:push:<id>`` (hash: config
id -> config, PX): one tag per owner, so a listing reads its tasks in one slot. The
watched set ``{<p>:a2a-watch}:watched`` and the claims ``a2a-claim:<key>`` stand alone.
"""

from __future__ import annotations

import hashlib
from typing import cast

from redis.asyncio import Redis, RedisCluster

from agent_reach.backends.redis.errors import translate_errors
from agent_reach.backends.redis.keys import hash_tag, join_key, to_ms

MAX_LISTED = 1000  # tasks kept listable per owner, as in memory
_SEP = "\n"  # between owner and task id in a watched-set member


class RedisA2AStore:
    """`A2AStore` on Redis."""

    def __init__(self, client: Redis | RedisCluster, prefix: str) -> None:
        self._client = client
        self._prefix = prefix
        self._watched_key = join_key(prefix, hash_tag(prefix, "a2a-watch"), "watched")

    def _owner_key(self, owner: str, *parts: str) -> str:
        digest = hashlib.sha256(owner.encode()).hexdigest()[:32]
        return join_key(self._prefix, "a2a", hash_tag(self._prefix, f"a2a:{digest}"), *parts)

    @translate_errors
    async def put_task(
        self, owner: str, task_id: str, document: bytes, created_at: float, ttl_s: float
    ) -> None:
        index = self._owner_key(owner, "tasks")
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.set(self._owner_key(owner, "task", task_id), document, px=to_ms(ttl_s))
            pipe.zadd(index, {task_id: created_at}, nx=True)
            pipe.zremrangebyrank(index, 0, -MAX_LISTED - 1)
            pipe.pexpire(index, to_ms(ttl_s))
            await pipe.execute()

    @translate_errors
    async def get_task(self, owner: str, task_id: str) -> bytes | None:
        return cast(bytes | None, await self._client.get(self._owner_key(owner, "task", task_id)))

    @translate_errors
    async def list_tasks(self, owner: str, limit: int) -> list[bytes]:
        index = self._owner_key(owner, "tasks")
        listed = cast(list[bytes], await self._client.zrevrange(index, 0, MAX_LISTED - 1))
        ids = [i.decode() for i in listed]
        if not ids:
            return []
        documents = await self._client.mget([self._owner_key(owner, "task", i) for i in ids])
        gone = [i for i, d in zip(ids, documents, strict=True) if d is None]
        if gone:
            await self._client.zrem(index, *gone)
        return [cast(bytes, d) for d in documents if d is not None][:limit]

    @translate_errors
    async def put_push(
        self, owner: str, task_id: str, config_id: str, document: bytes, ttl_s: float
    ) -> None:
        key = self._owner_key(owner, "push", task_id)
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.hset(key, config_id, document)
            pipe.pexpire(key, to_ms(ttl_s))
            await pipe.execute()
        await self._client.sadd(self._watched_key, f"{owner}{_SEP}{task_id}")

    @translate_errors
    async def list_push(self, owner: str, task_id: str) -> dict[str, bytes]:
        raw = cast(
            dict[bytes, bytes], await self._client.hgetall(self._owner_key(owner, "push", task_id))
        )
        return {k.decode(): v for k, v in raw.items()}

    @translate_errors
    async def delete_push(self, owner: str, task_id: str, config_id: str) -> bool:
        return bool(await self._client.hdel(self._owner_key(owner, "push", task_id), config_id))

    @translate_errors
    async def watched(self) -> list[tuple[str, str]]:
        members = cast(set[bytes], await self._client.smembers(self._watched_key))
        pairs = (m.decode().partition(_SEP) for m in members)
        return sorted((owner, task_id) for owner, _, task_id in pairs)

    @translate_errors
    async def unwatch(self, owner: str, task_id: str) -> None:
        await self._client.srem(self._watched_key, f"{owner}{_SEP}{task_id}")

    @translate_errors
    async def claim_update(self, key: str, ttl_s: float) -> bool:
        claimed = await self._client.set(
            join_key(self._prefix, "a2a-claim", key), b"1", px=to_ms(ttl_s), nx=True
        )
        return bool(claimed)
