"""Coordinator liveness in Redis: one hash, a field per coordinator, renewed by one script.

Key under ``<prefix>:``: ``liveness``, a hash of node id -> the millisecond (Redis TIME)
its record runs out. One key, so one slot on a cluster: a beat a second per coordinator.
"""

from __future__ import annotations

from redis.asyncio import Redis, RedisCluster

from agent_reach.backends.protocols import LIVENESS_RETENTION_S
from agent_reach.backends.redis.errors import translate_errors
from agent_reach.backends.redis.keys import join_key, to_ms
from agent_reach.backends.redis.scripts import register_script


class RedisLivenessStore:
    """`LivenessStore` on Redis, shared by every coordinator using the same prefix."""

    def __init__(self, client: Redis | RedisCluster, prefix: str) -> None:
        self._key = join_key(prefix, "liveness")
        self._beat = register_script(client, "liveness_beat")

    @translate_errors
    async def beat(self, node: str, ttl_s: float) -> frozenset[str]:
        dead = await self._beat(
            keys=[self._key], args=[node, to_ms(ttl_s), to_ms(LIVENESS_RETENTION_S)]
        )
        return frozenset(n.decode() for n in dead)
