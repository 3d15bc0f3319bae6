"""The mesh's shared state in Redis: disabled agents and chain budgets.

Keys under ``<prefix>:``: ``disabled`` (a hash: agent id -> who disabled it, when) and
``spent:<root request id>`` (a chain's spent budget, checked and added by one script).
"""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis, RedisCluster

from agent_reach.backends.redis.errors import translate_errors
from agent_reach.backends.redis.keys import join_key, to_ms
from agent_reach.backends.redis.scripts import register_script


class RedisMeshStore:
    """`MeshStore` on Redis, shared by every coordinator."""

    def __init__(self, client: Redis | RedisCluster, prefix: str) -> None:
        self._client = client
        self._prefix = prefix
        self._disabled = join_key(prefix, "disabled")
        self._spend = register_script(client, "mesh_spend")

    @translate_errors
    async def set_disabled(self, agent_id: str, record: bytes | None) -> bool:
        if record is None:
            return bool(await self._client.hdel(self._disabled, agent_id))
        return bool(await self._client.hset(self._disabled, agent_id, record))

    @translate_errors
    async def disabled(self) -> dict[str, bytes]:
        found = cast(dict[bytes, bytes], await self._client.hgetall(self._disabled))
        return {k.decode(): v for k, v in found.items()}

    @translate_errors
    async def spend(self, chain: str, amount: float, limit: float, ttl_s: float) -> float | None:
        total = await self._spend(
            keys=[join_key(self._prefix, "spent", chain)], args=[amount, limit, to_ms(ttl_s)]
        )
        return None if total is None else float(total)
