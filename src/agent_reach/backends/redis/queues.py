"""Work queues in Redis Streams: one stream and one consumer group per queue.

Keys under ``<prefix>:``: ``queue:<name>``, a stream whose entries hold the payload in
field ``p``, read through the group ``agent-reach``; and for `push_once`, a marker per
`once` id tagged with the stream's name, so marker and stream share a cluster slot. An
entry stays in the group's pending list, owned by the consumer it was handed to, until
`ack` removes it from the list and the stream together; `depth` is therefore the
stream's length.

A blocking read runs on its own client, whose socket timeout exceeds the longest block
(`MAX_BLOCK_S`), so waiting for entries never trips the normal store timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import cast

from redis.asyncio import Redis, RedisCluster
from redis.exceptions import TimeoutError as RedisTimeoutError

from agent_reach.backends.redis.errors import store_unavailable, translate_errors
from agent_reach.backends.redis.keys import (
    PAYLOAD_FIELD,
    StreamEntries,
    join_key,
    queue_once_key,
    to_ms,
)
from agent_reach.backends.redis.scripts import register_script

GROUP = "agent-reach"  # every coordinator reads a queue through this one consumer group
MAX_BLOCK_S = 30.0  # a longer `block_s` is cut to this; the blocking client's socket allows it


class RedisQueueStore:
    """`QueueStore` on Redis Streams, shared by every coordinator using the same prefix."""

    def __init__(
        self,
        client: Redis | RedisCluster,
        blocking: Redis | RedisCluster,
        prefix: str,
        *,
        timeout_s: float,
    ) -> None:
        self._client = client
        self._blocking = blocking
        self._prefix = prefix
        self._timeout_s = timeout_s
        self._pull = register_script(client, "queue_pull")
        self._touch = register_script(client, "queue_touch")
        self._ack = register_script(client, "queue_ack")
        self._push_once = register_script(client, "queue_push_once")

    @translate_errors
    async def push(self, queue: str, payload: bytes) -> str:
        entry_id = await self._client.xadd(self._stream(queue), {PAYLOAD_FIELD: payload})
        return cast(bytes, entry_id).decode()

    @translate_errors
    async def push_once(self, queue: str, payload: bytes, once: str, ttl_s: float) -> bool:
        stream = self._stream(queue)
        marker = queue_once_key(self._prefix, stream, once)
        pushed = await self._push_once(
            keys=[stream, marker], args=[PAYLOAD_FIELD, payload, to_ms(ttl_s)]
        )
        return bool(pushed)

    @translate_errors
    async def pull(
        self,
        queue: str,
        consumer: str,
        *,
        count: int,
        block_s: float,
        stale_s: float,
        dead: Collection[str] = (),
    ) -> list[tuple[str, bytes]]:
        if count <= 0:
            return []
        stream = self._stream(queue)
        args: list[str | int] = [GROUP, consumer, count, to_ms(stale_s), *dead]
        flat = await self._pull(keys=[stream], args=args)
        if flat or block_s <= 0:
            return [
                (entry_id.decode(), payload)
                for entry_id, payload in zip(flat[::2], flat[1::2], strict=True)
            ]
        return await self._wait_for_new(stream, consumer, count, min(block_s, MAX_BLOCK_S))

    async def _wait_for_new(
        self, stream: str, consumer: str, count: int, block_s: float
    ) -> list[tuple[str, bytes]]:
        """New entries that arrive within `block_s`; a stalled Redis costs block + timeout."""
        try:
            async with asyncio.timeout(block_s + self._timeout_s):
                reply = await self._blocking.xreadgroup(
                    GROUP, consumer, {stream: ">"}, count=count, block=to_ms(block_s)
                )
        except TimeoutError as exc:
            raise store_unavailable(RedisTimeoutError()) from exc
        if not reply:
            return []
        [(_, entries)] = cast(list[tuple[bytes, StreamEntries]], reply)
        return [(entry_id.decode(), fields[PAYLOAD_FIELD]) for entry_id, fields in entries]

    @translate_errors
    async def touch(self, queue: str, consumer: str, entry_ids: list[str]) -> None:
        if entry_ids:
            await self._touch(keys=[self._stream(queue)], args=[GROUP, consumer, *entry_ids])

    @translate_errors
    async def ack(self, queue: str, entry_id: str) -> None:
        await self._ack(keys=[self._stream(queue)], args=[GROUP, entry_id])

    @translate_errors
    async def depth(self, queue: str) -> int:
        return int(await self._client.xlen(self._stream(queue)))

    def _stream(self, name: str) -> str:
        return join_key(self._prefix, "queue", name)
