"""Writes that wait for a replica: the script and ``WAIT`` on one connection, one round trip.

Redis replicates asynchronously, so a write its master acknowledged can vanish in a
failover. ``WAIT <replicas> <ms>`` after a write blocks until that many replicas have it
(or the time runs out), and it only covers writes made on the same connection: so the
script and the WAIT go out as one pipeline to the key's master. On a cluster that is a
connection of our own to the node the slot map names (redis-py's cluster pipeline
refuses scripts and would send WAIT elsewhere); a MOVED answer (the slot moved, nothing
ran) reloads the slot map through the cluster client and tries the new master once.
"""

from __future__ import annotations

from typing import Any

import structlog
from redis.asyncio import BlockingConnectionPool, Redis, RedisCluster
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, ResponseError

log = structlog.get_logger("agent_reach.backends.redis")

NODE_CONNECTIONS = 16  # per master, for the waited writes only


class ReplicaWait:
    """Runs scripts followed by ``WAIT replicas timeout_ms``; counts writes left unconfirmed."""

    def __init__(
        self, client: Redis | RedisCluster, replicas: int, timeout_ms: int, *, timeout_s: float
    ) -> None:
        self.client = client
        self.replicas = replicas
        self.timeout_ms = timeout_ms
        self.timeout_s = timeout_s
        self.unconfirmed = 0  # writes no replica confirmed within timeout_ms
        self._nodes: dict[str, Redis] = {}

    async def run(self, script: AsyncScript, keys: list[str], args: list[Any]) -> Any:
        """The script's reply, once `replicas` replicas have its writes or the wait ran out."""
        reply, acked = await self._attempt(script, keys, args)
        if isinstance(reply, ResponseError) and str(reply).startswith("MOVED"):
            await self._reload_slots(keys[0])
            reply, acked = await self._attempt(script, keys, args)
        if isinstance(reply, Exception):
            raise reply
        if int(acked) < self.replicas:
            self.unconfirmed += 1
            if self.unconfirmed == 1:  # once: a deployment without replicas would flood
                log.warning("redis_write_unreplicated", replicas=self.replicas, acked=acked)
        return reply

    async def _attempt(
        self, script: AsyncScript, keys: list[str], args: list[Any]
    ) -> tuple[Any, Any]:
        target = await self._master_of(keys[0])
        reply, acked = await self._send(target, script, keys, args)
        if isinstance(reply, NoScriptError):
            await target.script_load(script.script)
            reply, acked = await self._send(target, script, keys, args)
        return reply, acked

    async def aclose(self) -> None:
        nodes, self._nodes = self._nodes, {}
        for node in nodes.values():
            await node.aclose()

    async def _send(
        self, target: Redis, script: AsyncScript, keys: list[str], args: list[Any]
    ) -> tuple[Any, Any]:
        async with target.pipeline(transaction=False) as pipe:
            pipe.evalsha(script.sha, len(keys), *keys, *args)
            pipe.execute_command("WAIT", self.replicas, self.timeout_ms)
            reply, acked = await pipe.execute(raise_on_error=False)
        if isinstance(acked, Exception):
            raise acked
        return reply, acked

    async def _master_of(self, key: str) -> Redis:
        if not isinstance(self.client, RedisCluster):
            return self.client
        node = self.client.get_node_from_key(key)
        if node is None:
            await self._reload_slots(key)
            node = self.client.get_node_from_key(key)
            if node is None:
                raise ResponseError(f"no node serves {key}")
        found = self._nodes.get(node.name)
        if found is None:
            pool = BlockingConnectionPool(
                host=node.host,
                port=int(node.port),
                max_connections=NODE_CONNECTIONS,
                timeout=self.timeout_s,
                socket_timeout=self.timeout_s + self.timeout_ms / 1000,
                socket_connect_timeout=self.timeout_s,
            )
            found = self._nodes[node.name] = Redis.from_pool(pool)
        return found

    async def _reload_slots(self, key: str) -> None:
        """A keyed read through the cluster client, which follows MOVED and learns the map."""
        assert isinstance(self.client, RedisCluster)
        await self.client.exists(key)
