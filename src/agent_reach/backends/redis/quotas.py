"""Token buckets in Redis: one Lua script per take, timed by the server's own clock.

Keys under ``<prefix>:``: ``quota:<bucket>``, a hash of tokens and the time they were
counted, expiring once a full refill has passed (an idle bucket is a full bucket).
"""

from __future__ import annotations

from redis.asyncio import Redis, RedisCluster

from agent_reach.backends.redis.errors import translate_errors
from agent_reach.backends.redis.keys import join_key
from agent_reach.backends.redis.scripts import register_script


class RedisQuotaStore:
    """`QuotaStore` on Redis: several coordinators draw from the same buckets."""

    def __init__(self, client: Redis | RedisCluster, prefix: str) -> None:
        self._prefix = prefix
        self._take = register_script(client, "quota_take")

    @translate_errors
    async def take(self, key: str, rate_per_s: float, burst: int) -> float:
        wait_ms = await self._take(
            keys=[join_key(self._prefix, "quota", key)], args=[repr(rate_per_s), burst]
        )
        return int(wait_ms) / 1000
