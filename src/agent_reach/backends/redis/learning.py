"""Routed texts and learned examples in Redis, shared by every coordinator.

Keys under ``<prefix>:``: ``routed:<request id>`` (a string with PX expiry),
``learned:docs`` and ``learned:cap`` (hashes by example id), ``learned:by:<capability>``
and ``learned:all`` (sorted sets scored by expiry, Redis TIME in ms), ``learned:version``.
"""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis

from agent_reach.backends.redis.errors import translate_errors
from agent_reach.backends.redis.keys import join_key, to_ms
from agent_reach.backends.redis.scripts import register_script


class RedisLearningStore:
    """`LearningStore` on Redis: every change of the examples is one Lua script."""

    def __init__(self, client: Redis, prefix: str) -> None:
        self._client = client
        self._prefix = prefix
        self._docs = join_key(prefix, "learned", "docs")
        self._capability_of = join_key(prefix, "learned", "cap")
        self._all = join_key(prefix, "learned", "all")
        self._version = join_key(prefix, "learned", "version")
        self._add = register_script(client, "learning_add")
        self._list = register_script(client, "learning_list")
        self._delete = register_script(client, "learning_delete")

    def _keys(self, capability: str) -> list[str]:
        by_capability = join_key(self._prefix, "learned", "by", capability)
        return [self._docs, self._capability_of, by_capability, self._all, self._version]

    @translate_errors
    async def put_text(self, request_id: str, document: bytes, ttl_s: float) -> None:
        key = join_key(self._prefix, "routed", request_id)
        await self._client.set(key, document, px=to_ms(ttl_s))

    @translate_errors
    async def get_text(self, request_id: str) -> bytes | None:
        key = join_key(self._prefix, "routed", request_id)
        return cast(bytes | None, await self._client.get(key))

    @translate_errors
    async def add_example(
        self, example_id: str, capability: str, document: bytes, *, ttl_s: float, keep: int
    ) -> None:
        await self._add(
            keys=self._keys(capability),
            args=[example_id, capability, document, to_ms(ttl_s), keep],
        )

    @translate_errors
    async def examples(self) -> list[bytes]:
        found = await self._list(keys=[self._docs, self._all])
        return [doc for doc in found if doc is not None]

    @translate_errors
    async def delete_example(self, example_id: str) -> bool:
        capability = cast(bytes | None, await self._client.hget(self._capability_of, example_id))
        if capability is None:
            return False
        tag = capability.decode()
        return bool(await self._delete(keys=self._keys(tag), args=[example_id, tag]))

    @translate_errors
    async def version(self) -> int:
        return int(await self._client.get(self._version) or 0)
