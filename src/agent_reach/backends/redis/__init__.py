"""Shared state in Redis, so any number of coordinators can serve the same agents.

This package decides how each store maps onto keys, expiries and Lua scripts: every
atomic operation is one script, and a lease is a key's expiry, never a Python timer.
It must never let a redis-py error, or a call without a timeout, reach its callers:
they see `StoreUnavailable` and nothing else.
"""

from __future__ import annotations

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from agent_reach.backends.bundle import Backends
from agent_reach.backends.redis.errors import store_unavailable
from agent_reach.backends.redis.registry import RedisRegistryStore
from agent_reach.clock import Clock
from agent_reach.config import Settings
from agent_reach.errors import InvalidRequest

MAX_CONNECTIONS = 64  # per coordinator; a caller waits up to redis_timeout_s for a free one
HEALTH_CHECK_INTERVAL_S = 10  # a pooled connection idle this long is pinged before reuse
CLIENT_NAME = "agent-reach"  # shows in CLIENT LIST, to tell our connections apart

# One quick retry on a dropped connection heals a pool that a Redis restart left stale;
# timeouts are not retried, so a stalled Redis costs one redis_timeout_s, not several.
_RETRY = Retry(
    ExponentialWithJitterBackoff(base=0.01, cap=0.05), 1, supported_errors=(RedisConnectionError,)
)


async def open_redis(settings: Settings, clock: Clock) -> Backends:
    """Connect to `settings.redis_url` and check it answers; `StoreUnavailable` when not.

    Leases are Redis key expiry, so `clock` is not consulted.
    """
    try:
        pool = BlockingConnectionPool.from_url(
            settings.redis_url,
            max_connections=MAX_CONNECTIONS,
            timeout=settings.redis_timeout_s,
            socket_timeout=settings.redis_timeout_s,
            socket_connect_timeout=settings.redis_timeout_s,
            health_check_interval=HEALTH_CHECK_INTERVAL_S,
            retry=_RETRY,
            client_name=CLIENT_NAME,
        )
    except ValueError as exc:
        raise InvalidRequest(f"AR_REDIS_URL is not a usable Redis URL: {exc}") from exc
    client = Redis.from_pool(pool)
    try:
        await client.ping()
    except RedisError as exc:
        await client.aclose()
        raise store_unavailable(exc) from exc
    registry = RedisRegistryStore(client, settings.redis_prefix, timeout_s=settings.redis_timeout_s)
    return Backends(name="redis", registry=registry, is_shared=True, closers=[client.aclose])
