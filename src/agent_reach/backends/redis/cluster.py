"""The Redis Cluster client: the nodes found from any one, calls gated like a pool.

redis-py's cluster client fails a call at once when a node's connections are all busy;
the standalone pool makes a caller wait up to `redis_timeout_s` for one. `GatedCluster`
keeps that behaviour with one semaphore of `max_connections` permits per client, so a
burst queues for a moment instead of turning into 503s.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from redis.asyncio import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import TimeoutError as RedisTimeoutError

from agent_reach.config import Settings
from agent_reach.errors import InvalidRequest

HEALTH_CHECK_INTERVAL_S = 10  # a pooled connection idle this long is pinged before reuse
CLIENT_NAME = "agent-reach"  # shows in CLIENT LIST, to tell our connections apart
# A call that meets a dead master, MOVED or CLUSTERDOWN reloads the slot map and tries
# again: 3 retries, 50-200 ms apart, cover a loopback failover's first moments and still
# answer (or fail) within about a second, never hang.
CLUSTER_RETRY_BASE_S = 0.05
CLUSTER_RETRY_CAP_S = 0.2
CLUSTER_RETRIES = 3


class GatedCluster(RedisCluster):
    """A `RedisCluster` whose commands wait (up to a timeout) for one of `permits` slots."""

    def __init__(self, *args: Any, permits: int, wait_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gate = asyncio.Semaphore(permits)
        self._wait_s = wait_s

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        try:
            async with asyncio.timeout(self._wait_s):
                await self._gate.acquire()
        except TimeoutError as exc:
            raise RedisTimeoutError("no free connection to the cluster") from exc
        try:
            return await super().execute_command(*args, **kwargs)
        finally:
            self._gate.release()


def connect_cluster(
    settings: Settings, *, max_connections: int, socket_timeout_s: float
) -> GatedCluster:
    """A client of the Redis Cluster that `AR_REDIS_URL` names one node of.

    At most `max_connections` calls are in flight (so no node is asked for more). Full
    coverage is not required: while one master fails over, the others' slots still serve.
    """
    try:
        client = GatedCluster.from_url(
            settings.redis_url,
            permits=max_connections,
            wait_s=settings.redis_timeout_s,
            max_connections=max_connections,
            socket_timeout=socket_timeout_s,
            socket_connect_timeout=settings.redis_timeout_s,
            health_check_interval=HEALTH_CHECK_INTERVAL_S,
            retry=Retry(
                ExponentialWithJitterBackoff(base=CLUSTER_RETRY_BASE_S, cap=CLUSTER_RETRY_CAP_S),
                CLUSTER_RETRIES,
            ),
            require_full_coverage=False,
            client_name=CLIENT_NAME,
        )
    except ValueError as exc:
        raise InvalidRequest(f"AR_REDIS_URL is not a usable Redis URL: {exc}") from exc
    return cast(GatedCluster, client)
