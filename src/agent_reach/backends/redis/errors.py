"""The seam where redis-py errors become `StoreUnavailable` with a short, driver-free message."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

import redis.asyncio.connection
from redis.exceptions import (
    BusyLoadingError,
    ClusterDownError,
    OutOfMemoryError,
    RedisClusterException,
    RedisError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agent_reach.cancellation import honour_cancel
from agent_reach.errors import StoreFull, StoreUnavailable

P = ParamSpec("P")
T = TypeVar("T")


# What redis-py raises: RedisError, and on a cluster also RedisClusterException (a slot no
# node serves yet, a topology it cannot read), which does not derive from RedisError.
DriverError = (RedisError, RedisClusterException)
_DRIVER_CONNECTION = redis.asyncio.connection.__file__


def lost_transport(exc: BaseException) -> bool:
    """An error that is not redis-py's own but came out of its connection code: a node
    killed while a connection to it was being set up (seen in Cluster failovers) leaves
    uvloop's RuntimeError for a write on a closed transport, or an AttributeError on the
    writer another task's disconnect cleared. A lost connection, not a bug of ours."""
    if not isinstance(exc, RuntimeError | AttributeError):
        return False
    trace = exc.__traceback__
    while trace is not None:
        if trace.tb_frame.f_code.co_filename == _DRIVER_CONNECTION:
            return True
        trace = trace.tb_next
    return False


def store_unavailable(exc: Exception) -> StoreUnavailable:
    """The one error callers see, whatever redis-py raised (or `lost_transport`).

    Raises `CancelledError` instead when the calling task has been cancelled: redis-py
    can report a cancel that landed inside a command as its own timeout or lost
    connection, and a store error is forgiven where a cancel must end the task.
    """
    honour_cancel()
    # BusyLoadingError is a ConnectionError: test it first.
    if isinstance(exc, BusyLoadingError):
        return StoreUnavailable("redis is loading its data set")
    if isinstance(exc, RedisTimeoutError):
        return StoreUnavailable("redis did not answer in time")
    if isinstance(exc, RedisConnectionError) or lost_transport(exc):
        return StoreUnavailable("redis is unreachable")
    if isinstance(exc, OutOfMemoryError):
        # maxmemory with noeviction: a script or MULTI refused at its first write.
        return StoreFull("redis is out of memory (maxmemory): nothing was written")
    if isinstance(exc, ClusterDownError | TryAgainError | SlotNotCoveredError):
        # During a failover, until a replica has taken over the lost master's slots.
        return StoreUnavailable("redis cluster is failing over")
    return StoreUnavailable("redis refused the operation")


def translate_errors(
    operation: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """Wrap a store method so no redis-py error escapes it, and no cancel is lost in it:
    a blocking read cancelled in a coordinator's shutdown was seen to come back with an
    empty answer, the cancel gone, and its queue loop pulled on until the 15 s limit."""

    @functools.wraps(operation)
    async def guarded(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            result = await operation(*args, **kwargs)
        except DriverError as exc:
            raise store_unavailable(exc) from exc
        except (RuntimeError, AttributeError) as exc:
            if not lost_transport(exc):
                raise
            raise store_unavailable(exc) from exc
        honour_cancel()  # a cancel the driver absorbed whole: the command still "answered"
        return result

    return guarded
