"""Card-text vectors in Redis, shared by every coordinator.

Keys under ``<prefix>:``: ``emb:<sha256 of model NUL text>`` (a string: the vector's
bytes), expiring `EMBEDDING_TTL_S` after its last put. Single-key operations, pipelined:
no hash tag, so they spread over every master of a cluster.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import cast

from redis.asyncio import Redis, RedisCluster

from agent_reach.backends.redis.errors import translate_errors
from agent_reach.backends.redis.keys import join_key, to_ms

# A month: a catalog's texts change rarely, and an entry nobody asked for in a month is
# one embedding call to make again.
EMBEDDING_TTL_S = 30 * 86_400.0


class RedisEmbeddingStore:
    """`EmbeddingStore` on Redis strings."""

    def __init__(self, client: Redis | RedisCluster, prefix: str) -> None:
        self._client = client
        self._prefix = prefix

    def _key(self, model: str, text: str) -> str:
        digest = hashlib.sha256(f"{model}\0{text}".encode()).hexdigest()
        return join_key(self._prefix, "emb", digest)

    @translate_errors
    async def get_many(self, model: str, texts: Sequence[str]) -> list[bytes | None]:
        if not texts:
            return []
        async with self._client.pipeline(transaction=False) as pipe:
            for text in texts:
                pipe.get(self._key(model, text))
            return cast(list[bytes | None], await pipe.execute())

    @translate_errors
    async def put_many(self, model: str, vectors: Sequence[tuple[str, bytes]]) -> None:
        if not vectors:
            return
        ttl_ms = to_ms(EMBEDDING_TTL_S)
        async with self._client.pipeline(transaction=False) as pipe:
            for text, vector in vectors:
                pipe.set(self._key(model, text), vector, px=ttl_ms)
            await pipe.execute()
