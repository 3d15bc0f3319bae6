"""The Lua scripts shipped in `lua/`, registered with a client once per store."""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from redis.asyncio import Redis, RedisCluster
from redis.commands.core import AsyncScript


@cache
def read_script(name: str) -> str:
    """The source of ``lua/<name>.lua`` (package data, read once per process)."""
    return (files("agent_reach.backends.redis") / "lua" / f"{name}.lua").read_text(encoding="utf-8")


def register_script(client: Redis | RedisCluster, name: str) -> AsyncScript:
    """A callable script: EVALSHA, loading the source again if the server lost it."""
    return client.register_script(read_script(name))
