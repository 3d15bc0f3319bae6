"""Capped journals (dead letters) in Redis: one stream per journal, trimmed exactly.

Keys under ``<prefix>:``: ``journal:<name>``, a stream whose entries hold the payload in
field ``p``. ``MAXLEN =`` (not ``~``) trims in the same command, so `cap` is never exceeded.
"""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis, RedisCluster

from agent_reach.backends.redis.errors import translate_errors
from agent_reach.backends.redis.keys import PAYLOAD_FIELD, StreamEntries, join_key


class RedisJournalStore:
    """`JournalStore` on Redis Streams."""

    def __init__(self, client: Redis | RedisCluster, prefix: str) -> None:
        self._client = client
        self._prefix = prefix

    @translate_errors
    async def append(self, name: str, payload: bytes, cap: int) -> None:
        await self._client.xadd(
            self._stream(name), {PAYLOAD_FIELD: payload}, maxlen=cap, approximate=False
        )

    @translate_errors
    async def recent(self, name: str, limit: int) -> list[bytes]:
        if limit <= 0:
            return []
        entries = cast(StreamEntries, await self._client.xrevrange(self._stream(name), count=limit))
        return [fields[PAYLOAD_FIELD] for _, fields in entries]

    @translate_errors
    async def count(self, name: str) -> int:
        return int(await self._client.xlen(self._stream(name)))

    def _stream(self, name: str) -> str:
        return join_key(self._prefix, "journal", name)
