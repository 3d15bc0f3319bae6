"""Pick a backend by name (`memory`, `redis`, `redis-cluster`) or import string.

`redis-cluster` is `redis` with `AR_REDIS_CLUSTER=1`: the URL names any cluster node.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from typing import cast

from agent_reach.backends.bundle import Backends
from agent_reach.clock import Clock
from agent_reach.config import Settings
from agent_reach.errors import InvalidRequest

BackendFactory = Callable[[Settings, Clock], Awaitable[Backends]]

BACKENDS: dict[str, str] = {
    "memory": "agent_reach.backends.memory:open_memory",
    "redis": "agent_reach.backends.redis:open_redis",
    "redis-cluster": "agent_reach.backends.redis:open_redis_cluster",
}


def resolve_backend(name: str) -> BackendFactory:
    """The factory behind a backend name; imported only when asked for."""
    target = BACKENDS.get(name, name)
    module_name, sep, attr = target.partition(":")
    if not sep:
        raise InvalidRequest(
            f"unknown backend {name!r}: use one of {sorted(BACKENDS)} or package.module:factory"
        )
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InvalidRequest(f"backend {name!r} cannot be loaded: {exc}") from exc
    return cast(BackendFactory, factory)


async def open_backends(settings: Settings, clock: Clock) -> Backends:
    """Open the backend the settings name."""
    return await resolve_backend(settings.registry_backend)(settings, clock)
