"""Fleet load in Redis: one hash, a field per coordinator, exchanged by one script.

Key under ``<prefix>:``: ``fleet:load``, a hash of node id -> ``<published ms> <json
counts>``, stamped and aged by Redis TIME; the key expires when every coordinator has
stopped publishing.
"""

from __future__ import annotations

import orjson
from redis.asyncio import Redis, RedisCluster

from agent_reach.backends.redis.errors import translate_errors
from agent_reach.backends.redis.keys import join_key, to_ms
from agent_reach.backends.redis.scripts import register_script


class RedisFleetLoadStore:
    """`FleetLoadStore` on Redis: every coordinator sees the others' in-flight counts."""

    def __init__(self, client: Redis | RedisCluster, prefix: str) -> None:
        self._key = join_key(prefix, "fleet", "load")
        self._exchange = register_script(client, "fleet_load_exchange")

    @translate_errors
    async def exchange(
        self, node_id: str, counts: dict[str, int], stale_s: float
    ) -> dict[str, int]:
        raw = await self._exchange(
            keys=[self._key], args=[node_id, orjson.dumps(counts), to_ms(stale_s)]
        )
        totals = orjson.loads(raw)
        return totals if isinstance(totals, dict) else {}  # cjson writes {} and [] alike
