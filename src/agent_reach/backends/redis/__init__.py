"""Shared state in Redis, so any number of coordinators can serve the same agents.

This package decides how each store maps onto keys, expiries and Lua scripts: every
atomic operation is one script, and a lease is a key's expiry or a deadline read with
Redis TIME, never a Python timer or a coordinator's clock.
It must never let a redis-py error, or a call without a timeout, reach its callers:
they see `StoreUnavailable` and nothing else.
"""

from __future__ import annotations

import asyncio

import structlog
from redis.asyncio import BlockingConnectionPool, Redis, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agent_reach.backends.bundle import Backends
from agent_reach.backends.redis.a2a import RedisA2AStore
from agent_reach.backends.redis.apikeys import RedisKeyStore
from agent_reach.backends.redis.cluster import (
    CLIENT_NAME,
    HEALTH_CHECK_INTERVAL_S,
    connect_cluster,
)
from agent_reach.backends.redis.contexts import RedisContextStore
from agent_reach.backends.redis.embeddings import RedisEmbeddingStore
from agent_reach.backends.redis.errors import DriverError, store_unavailable
from agent_reach.backends.redis.fleet_load import RedisFleetLoadStore
from agent_reach.backends.redis.idempotency import RedisIdempotencyStore
from agent_reach.backends.redis.journal import RedisJournalStore
from agent_reach.backends.redis.learning import RedisLearningStore
from agent_reach.backends.redis.liveness import RedisLivenessStore
from agent_reach.backends.redis.mesh import RedisMeshStore
from agent_reach.backends.redis.policy import RedisPolicyStore
from agent_reach.backends.redis.quality import RedisQualityStore
from agent_reach.backends.redis.queues import MAX_BLOCK_S, RedisQueueStore
from agent_reach.backends.redis.quotas import RedisQuotaStore
from agent_reach.backends.redis.registry import RedisRegistryStore
from agent_reach.backends.redis.replication import ReplicaWait
from agent_reach.backends.redis.runs import RedisRunStore, RedisWorkflowStore
from agent_reach.backends.redis.tasks import (
    RedisAnswerCache,
    RedisKeySetStore,
    RedisTaskStore,
)
from agent_reach.backends.redis.why import RedisWhyStore
from agent_reach.clock import Clock
from agent_reach.config import Settings
from agent_reach.errors import InvalidRequest

log = structlog.get_logger("agent_reach.backends")

MAX_CONNECTIONS = 64  # per coordinator; a caller waits up to redis_timeout_s for a free one
# Each waiting queue consumer holds one of these for up to MAX_BLOCK_S; a coordinator runs
# a handful of consumers, and a pull finding none free fails after redis_timeout_s.
MAX_BLOCKING_CONNECTIONS = 16
# A Redis that answers slowly at start (a busy host; a cluster client reading COMMAND's
# long reply) is asked again for this long; one that refuses is reported at once.
STARTUP_PATIENCE_S = 5.0

# One quick retry on a dropped connection heals a pool that a Redis restart left stale;
# timeouts are not retried, so a stalled Redis costs one redis_timeout_s, not several.
_RETRY = Retry(
    ExponentialWithJitterBackoff(base=0.01, cap=0.05), 1, supported_errors=(RedisConnectionError,)
)


def _connect(
    settings: Settings, *, max_connections: int, socket_timeout_s: float
) -> Redis | RedisCluster:
    """A client on its own pool; `InvalidRequest` when the URL is unusable."""
    if settings.redis_cluster:
        return connect_cluster(
            settings, max_connections=max_connections, socket_timeout_s=socket_timeout_s
        )
    try:
        pool = BlockingConnectionPool.from_url(
            settings.redis_url,
            max_connections=max_connections,
            timeout=settings.redis_timeout_s,
            socket_timeout=socket_timeout_s,
            socket_connect_timeout=settings.redis_timeout_s,
            health_check_interval=HEALTH_CHECK_INTERVAL_S,
            retry=_RETRY,
            client_name=CLIENT_NAME,
        )
    except ValueError as exc:
        raise InvalidRequest(f"AR_REDIS_URL is not a usable Redis URL: {exc}") from exc
    return Redis.from_pool(pool)


async def _first_ping(client: Redis | RedisCluster) -> None:
    """PING, asked again while Redis only answers late, for up to STARTUP_PATIENCE_S."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + STARTUP_PATIENCE_S
    while True:
        try:
            await client.ping()
            return
        except RedisTimeoutError:
            if loop.time() >= give_up:
                raise
            log.warning("redis_slow_at_start", waiting_s=STARTUP_PATIENCE_S)


async def open_redis(settings: Settings, clock: Clock) -> Backends:
    """Connect to `settings.redis_url` and check it answers; `StoreUnavailable` when not.

    With `settings.redis_cluster` the URL names any node of a Redis Cluster.
    Leases are Redis key expiry and Redis TIME, so `clock` is not consulted. Blocking
    queue reads get a client of their own, whose socket waits out the longest block.
    """
    timeout_s, prefix = settings.redis_timeout_s, settings.redis_prefix
    client = _connect(settings, max_connections=MAX_CONNECTIONS, socket_timeout_s=timeout_s)
    try:
        await _first_ping(client)
    except DriverError as exc:
        await client.aclose()
        raise store_unavailable(exc) from exc
    blocking = _connect(
        settings,
        max_connections=MAX_BLOCKING_CONNECTIONS,
        socket_timeout_s=timeout_s + MAX_BLOCK_S,
    )
    wait = (
        ReplicaWait(
            client, settings.redis_wait_replicas, settings.redis_wait_ms, timeout_s=timeout_s
        )
        if settings.redis_wait_replicas
        else None
    )
    return Backends(
        name="redis-cluster" if settings.redis_cluster else "redis",
        registry=RedisRegistryStore(client, prefix, timeout_s=timeout_s),
        idempotency=RedisIdempotencyStore(client, prefix, wait),
        tasks=RedisTaskStore(client, prefix),
        queues=RedisQueueStore(client, blocking, prefix, timeout_s=timeout_s),
        journal=RedisJournalStore(client, prefix),
        answers=RedisAnswerCache(client, prefix),
        keys=RedisKeyStore(client, prefix),
        keysets=RedisKeySetStore(client, prefix),
        quotas=RedisQuotaStore(client, prefix),
        contexts=RedisContextStore(client, prefix),
        fleet_load=RedisFleetLoadStore(client, prefix),
        runs=RedisRunStore(client, prefix),
        workflows=RedisWorkflowStore(client, prefix),
        learning=RedisLearningStore(client, prefix),
        policy=RedisPolicyStore(client, prefix),
        mesh=RedisMeshStore(client, prefix),
        quality=RedisQualityStore(client, prefix),
        liveness=RedisLivenessStore(client, prefix),
        a2a=RedisA2AStore(client, prefix),
        is_shared=True,
        why=RedisWhyStore(client, prefix),
        embeddings=RedisEmbeddingStore(client, prefix),
        closers=[client.aclose, blocking.aclose, *([wait.aclose] if wait else [])],
    )


async def open_redis_cluster(settings: Settings, clock: Clock) -> Backends:
    """`open_redis` on a Redis Cluster, whatever `settings.redis_cluster` says."""
    return await open_redis(settings.model_copy(update={"redis_cluster": True}), clock)
