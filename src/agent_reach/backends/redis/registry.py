"""Registry records in Redis: a lease is a key's expiry, every change is one Lua script.

Keys under ``<prefix>:{<prefix>:registry}:`` (one cluster slot, see `keys`):
``agent:<id>`` holds the record as JSON and outlives the lease by `OFFLINE_RETENTION_S`;
``lease:<id>`` holds the ttl in ms and expires with the lease; ``agents`` is the set of
ids, pruned when a record is gone; ``version`` counts the records stored and removed.
The script that makes a change also publishes it on ``events``, where health
announcements (which store nothing) go too: PUBLISH on a single Redis, SPUBLISH
(sharded pub/sub, served by the slot's own shard) on a Redis Cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import random
from collections.abc import AsyncIterator
from typing import Any, Literal, cast, get_args

import orjson
import structlog
from redis.asyncio import Redis, RedisCluster
from redis.asyncio.client import PubSub
from redis.exceptions import SlotNotCoveredError

from agent_reach.backends.protocols import (
    OFFLINE_RETENTION_S,
    InstanceRecord,
    LeasedRecord,
    RegistryEvent,
    RegistryListener,
)
from agent_reach.backends.redis.errors import DriverError, lost_transport, translate_errors
from agent_reach.backends.redis.keys import registry_key
from agent_reach.backends.redis.scripts import register_script
from agent_reach.model.agents import AgentSpec, HealthStatus

_rng = random.Random()  # our own: callers seeding `random` do not steer backoff

log = structlog.get_logger("agent_reach.backends.redis")

RETENTION_MS = round(OFFLINE_RETENTION_S * 1000)
WATCH_IDLE_S = 5.0  # a subscription this quiet is pinged, so a dead socket cannot hide
WATCH_BACKOFF_FIRST_S = 0.1  # first pause before subscribing again after Redis went away
WATCH_BACKOFF_CAP_S = 5.0  # pauses double up to this: an outage costs Redis one try per 5 s
_OPS = frozenset({"put", "renew", "remove", "health"})
_HEALTH_STATES = frozenset(get_args(HealthStatus))
_MESSAGE_TYPES = frozenset({"message", "smessage"})  # published, sharded-published


class RedisRegistryStore:
    """`RegistryStore` on Redis, shared by every coordinator using the same prefix."""

    def __init__(self, client: Redis | RedisCluster, prefix: str, *, timeout_s: float) -> None:
        self._client = client
        self._prefix = registry_key(prefix, "")
        self._listing = registry_key(prefix, "agents")
        self._version = registry_key(prefix, "version")
        self._channel = registry_key(prefix, "events")
        self._publish = "SPUBLISH" if isinstance(client, RedisCluster) else "PUBLISH"
        self._timeout_s = timeout_s
        self._put = register_script(client, "registry_put")
        self._renew = register_script(client, "registry_renew")
        self._remove = register_script(client, "registry_remove")
        self._load = register_script(client, "registry_load")

    @translate_errors
    async def put(self, record: InstanceRecord, origin: str) -> None:
        agent_id = record.spec.id
        document = encode_record(record)
        lease_ms = round(record.spec.ttl * 1000)
        event = {
            "op": "put",
            "agent_id": agent_id,
            "origin": origin,
            "lease_left_ms": lease_ms,
            "record": document,
        }
        await self._put(
            keys=[
                self._key("agent", agent_id),
                self._key("lease", agent_id),
                self._listing,
                self._version,
            ],
            args=[
                agent_id,
                orjson.dumps(document),
                lease_ms,
                lease_ms + RETENTION_MS,
                self._channel,
                orjson.dumps(event),
                self._publish,
            ],
        )

    @translate_errors
    async def renew(self, agent_id: str, origin: str) -> float | None:
        lease_ms = await self._renew(
            keys=[self._key("agent", agent_id), self._key("lease", agent_id)],
            args=[agent_id, origin, RETENTION_MS, self._channel, self._publish],
        )
        return None if lease_ms is None else int(lease_ms) / 1000

    @translate_errors
    async def remove(self, agent_id: str, origin: str) -> bool:
        deleted = await self._remove(
            keys=[
                self._key("agent", agent_id),
                self._key("lease", agent_id),
                self._listing,
                self._version,
            ],
            args=[agent_id, origin, self._channel, self._publish],
        )
        return bool(deleted)

    @translate_errors
    async def version(self) -> int:
        raw = await self._client.get(self._version)
        return 0 if raw is None else int(raw)

    @translate_errors
    async def get(self, agent_id: str) -> InstanceRecord | None:
        raw = await self._client.get(self._key("agent", agent_id))
        return None if raw is None else decode_record(orjson.loads(raw))

    @translate_errors
    async def load(self) -> list[LeasedRecord]:
        flat = await self._load(keys=[self._listing], args=[self._prefix])
        return [
            LeasedRecord(decode_record(orjson.loads(raw)), int(lease_ms) / 1000)
            for raw, lease_ms in zip(flat[::2], flat[1::2], strict=True)
        ]

    @translate_errors
    async def announce_health(self, agent_id: str, health: HealthStatus, origin: str) -> None:
        event = {"op": "health", "agent_id": agent_id, "origin": origin, "health": health}
        if isinstance(self._client, RedisCluster):
            await self._client.spublish(self._channel, orjson.dumps(event))
        else:
            await self._client.publish(self._channel, orjson.dumps(event))

    async def watch(self, listener: RegistryListener) -> None:
        """Follow the channel on a dedicated connection, subscribing again after an outage.

        Events published while the connection was down are lost; a full `load` heals them.
        """
        delay_s = WATCH_BACKOFF_FIRST_S
        while True:
            try:
                async with self._subscription() as pubsub:
                    delay_s = WATCH_BACKOFF_FIRST_S
                    await _call(listener, RegistryEvent(op="resync", agent_id="", origin=""))
                    await self._follow(pubsub, listener)
            except (*DriverError, TimeoutError, RuntimeError, AttributeError) as exc:
                if isinstance(exc, RuntimeError | AttributeError) and not lost_transport(exc):
                    raise
                log.warning("registry_watch_lost", error=type(exc).__name__, retry_in_s=delay_s)
            await asyncio.sleep(delay_s * _rng.uniform(0.5, 1.0))
            delay_s = min(delay_s * 2, WATCH_BACKOFF_CAP_S)

    @contextlib.asynccontextmanager
    async def _subscription(self) -> AsyncIterator[PubSub]:
        """The channel subscribed: on a cluster, SSUBSCRIBE on the channel's own shard.

        A keyed read through the cluster client first follows any failover, so the node
        the slot map names is the channel's current master.
        """
        if not isinstance(self._client, RedisCluster):
            async with self._client.pubsub(ignore_subscribe_messages=True) as pubsub:
                await pubsub.subscribe(self._channel)
                yield pubsub
            return
        await self._client.exists(self._listing)
        node = self._client.get_node_from_key(self._channel)
        if node is None:
            raise SlotNotCoveredError(f"no node serves {self._channel}")
        direct = Redis(
            host=node.host,
            port=int(node.port),
            socket_timeout=self._timeout_s,
            socket_connect_timeout=self._timeout_s,
        )
        try:
            async with direct.pubsub(ignore_subscribe_messages=True) as pubsub:
                await pubsub.ssubscribe(self._channel)
                yield pubsub
        finally:
            await direct.aclose()

    async def _follow(self, pubsub: PubSub, listener: RegistryListener) -> None:
        """Deliver messages forever; raise when the connection fails or goes silent."""
        while True:
            message = await pubsub.get_message(timeout=WATCH_IDLE_S)
            if message is not None:
                await self._deliver(message, listener)
                continue
            # Quiet: something must come back for a PING, or the socket died without saying so.
            await pubsub.ping()
            while True:
                async with asyncio.timeout(self._timeout_s):
                    message = await pubsub.get_message(timeout=None)
                if message is not None and message["type"] == "pong":
                    break
                await self._deliver(message, listener)

    async def _deliver(self, message: dict[str, Any] | None, listener: RegistryListener) -> None:
        if message is None or message["type"] not in _MESSAGE_TYPES:
            return
        try:
            event = decode_event(message["data"])
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("registry_event_unreadable", error=type(exc).__name__)
            return
        await _call(listener, event)

    def _key(self, kind: str, agent_id: str) -> str:
        return f"{self._prefix}{kind}:{agent_id}"


async def _call(listener: RegistryListener, event: RegistryEvent) -> None:
    try:
        outcome = listener(event)
        if inspect.isawaitable(outcome):
            await outcome
    except Exception:
        # One failing listener call must not end the watch that every later event needs.
        log.exception("registry_listener_failed", op=event.op, agent_id=event.agent_id)


def encode_record(record: InstanceRecord) -> dict[str, Any]:
    """The JSON form stored in ``agent:<id>`` and sent with `put` events."""
    return {
        "spec": record.spec.model_dump(mode="json"),
        "registered_at": record.registered_at,
        "owner": record.owner,
    }


def decode_record(document: dict[str, Any]) -> InstanceRecord:
    """The record back from its JSON form."""
    return InstanceRecord(
        spec=AgentSpec.model_validate(document["spec"]),
        registered_at=float(document["registered_at"]),
        owner=document.get("owner"),
    )


def decode_event(data: bytes) -> RegistryEvent:
    """A published change; `ValueError` when it is not one of ours."""
    payload = orjson.loads(data)
    op = payload["op"]
    if op not in _OPS:
        raise ValueError(f"unknown registry op {op!r}")
    health = payload.get("health") if op == "health" else None
    if op == "health" and health not in _HEALTH_STATES:
        raise ValueError(f"unknown health status {health!r}")
    record = payload.get("record")
    return RegistryEvent(
        op=cast(Literal["put", "renew", "remove", "health"], op),
        agent_id=str(payload["agent_id"]),
        origin=str(payload["origin"]),
        record=None if record is None else decode_record(record),
        lease_left_s=int(payload.get("lease_left_ms", 0)) / 1000,
        health=cast(HealthStatus | None, health),
    )
