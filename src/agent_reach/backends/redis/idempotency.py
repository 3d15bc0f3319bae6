"""Idempotency records in Redis: each operation is one Lua script.

Keys under ``<prefix>:``: ``idem:{<shard>}:<key>`` is a hash (fingerprint, fence, lease
deadline on Redis's clock, the agents it was sent to, then status and body);
``idem-fence:{<shard>}`` is the counter every fence of the shard's keys comes from, so a
fence is never handed out twice for a key, even after its record was released or expired
(layout and shards: `keys`).
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Literal, cast

from redis.asyncio import Redis, RedisCluster
from redis.commands.core import AsyncScript

from agent_reach.backends.protocols import Claim
from agent_reach.backends.redis.errors import translate_errors
from agent_reach.backends.redis.keys import (
    IDEMPOTENCY_SHARDS,
    idempotency_shard,
    idempotency_tag,
    join_key,
    to_ms,
)
from agent_reach.backends.redis.replication import ReplicaWait
from agent_reach.backends.redis.scripts import register_script

# An in-progress record's key outlives its lease by this much, so a late owner's
# `complete` is refused by fence, not by absence (the memory backend's grace, too).
TAKEOVER_GRACE_S = 3600.0
# Claim calls that failed, remembered by key (oldest forgotten first): enough for a store
# outage's worth of callers re-sending, bounded so an outage cannot grow memory.
MAX_UNANSWERED = 4096

ClaimState = Literal["claimed", "completed", "in_progress", "mismatch"]


class RedisIdempotencyStore:
    """`IdempotencyStore` on Redis, shared by every coordinator using the same prefix."""

    def __init__(
        self, client: Redis | RedisCluster, prefix: str, wait: ReplicaWait | None = None
    ) -> None:
        self._prefix = prefix
        self._wait = wait  # claims and answers then wait for a replica (AR_REDIS_WAIT_REPLICAS)
        self._claim = register_script(client, "idempotency_claim")
        self._complete = register_script(client, "idempotency_complete")
        self._release = register_script(client, "idempotency_release")
        self._sent = register_script(client, "idempotency_sent")
        self._peek = register_script(client, "idempotency_peek")
        self._unanswered: dict[str, str] = {}  # request key -> token of a claim call that failed

    @translate_errors
    async def claim(
        self,
        key: str,
        fingerprint: str,
        lease_s: float,
        *,
        node: str = "",
        takeover_from: str | None = None,
    ) -> Claim:
        return await self.claim_call(key, fingerprint, lease_s, node, takeover_from)()

    def claim_call(
        self,
        key: str,
        fingerprint: str,
        lease_s: float,
        node: str = "",
        takeover_from: str | None = None,
    ) -> Callable[[], Awaitable[Claim]]:
        """One claim as a call that can be sent again, as the client re-sends a script
        whose answer a dropped connection lost: its token lets the script know its own
        claim, which it answers `claimed` again rather than `in_progress` to itself.

        A call that fails may still have claimed the key, and nothing was delivered
        under a claim its caller never got: the next claim of the key through this
        store sends the same token, so it takes that claim over at once instead of
        waiting out its lease (a caller's re-send after a 503 is not refused 409)."""
        token = self._unanswered.pop(key, None) or secrets.token_hex(16)
        keys = [self._record(key), self._fences(key)]
        args = [
            fingerprint,
            to_ms(lease_s),
            to_ms(lease_s + TAKEOVER_GRACE_S),
            IDEMPOTENCY_SHARDS,
            idempotency_shard(key),
            token,
            node,
            takeover_from or "",
        ]

        async def call() -> Claim:
            try:
                reply = await self._write(self._claim, keys, args)
            except BaseException:
                self._unanswered[key] = token
                if len(self._unanswered) > MAX_UNANSWERED:
                    del self._unanswered[next(iter(self._unanswered))]
                raise
            return decode_claim(reply)

        return call

    @translate_errors
    async def complete(self, key: str, fence: int, status: int, body: bytes, ttl_s: float) -> bool:
        stored = await self._write(
            self._complete, [self._record(key)], [fence, status, body, to_ms(ttl_s)]
        )
        return bool(stored)

    async def _write(self, script: AsyncScript, keys: list[str], args: list[Any]) -> Any:
        if self._wait is None:
            return await script(keys=keys, args=args)
        return await self._wait.run(script, keys, args)

    @translate_errors
    async def note_sent(self, key: str, fence: int, agent_id: str) -> None:
        await self._write(self._sent, [self._record(key)], [fence, agent_id])

    @translate_errors
    async def release(self, key: str, fence: int, *, forget: bool = False) -> None:
        await self._release(keys=[self._record(key)], args=[fence, int(forget)])

    @translate_errors
    async def peek(self, key: str) -> Claim | None:
        reply = await self._peek(keys=[self._record(key)])
        return None if reply is None else decode_claim(reply)

    def _record(self, request_key: str) -> str:
        tag = idempotency_tag(self._prefix, idempotency_shard(request_key))
        return join_key(self._prefix, "idem", tag, request_key)

    def _fences(self, request_key: str) -> str:
        tag = idempotency_tag(self._prefix, idempotency_shard(request_key))
        return join_key(self._prefix, "idem-fence", tag)


def decode_claim(reply: list[bytes | int]) -> Claim:
    """A script's ``{state, fence[, status, body]}``, ``{claimed, fence, sent_to}`` or
    ``{in_progress, fence, node}``."""
    state = cast(ClaimState, cast(bytes, reply[0]).decode())
    if state == "claimed" and len(reply) > 2:
        sent_to = cast(bytes, reply[2]).decode().split("\n")
        return Claim(state, int(reply[1]), sent_to=tuple(s for s in sent_to if s))
    if state == "in_progress" and len(reply) > 2:
        return Claim(state, int(reply[1]), node=cast(bytes, reply[2]).decode())
    if state != "completed":
        return Claim(state, int(reply[1]))
    return Claim(state, int(reply[1]), int(reply[2]), cast(bytes, reply[3]))
