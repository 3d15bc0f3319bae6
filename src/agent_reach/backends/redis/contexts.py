"""Contexts in Redis: every operation is one Lua script, expiry is Redis's own.

Keys under ``<prefix>:``: ``ctx:{<id>}`` is the context's hash (document, version,
ttl, top-level field names, owner and shares, one entry per appended list) and
``ctx:{<id>}:<list>:<n>`` the list's segment n, a Redis list of items with its own
expiry. The braces put a context and its segments in one Redis Cluster hash slot, which
is what lets one script touch them all. ``context-secret`` holds the key of context
tokens (it never expires).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Literal, cast

import orjson
from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from agent_reach.backends.protocols import ContextWrite, SegmentPolicy, StoredContext, Swept
from agent_reach.backends.redis.errors import translate_errors
from agent_reach.backends.redis.keys import join_key, to_ms
from agent_reach.backends.redis.scripts import read_script

HOLD_BATCH = 1000  # hold scripts sent per round trip; each is short, so Redis never stalls

WriteState = Literal["written", "missing", "conflict", "not_a_list", "too_many_segments"]


def _context_script(client: Redis, name: str) -> AsyncScript:
    """A context script with the shared helpers of ``lua/context_lib.lua`` in front."""
    return client.register_script(read_script("context_lib") + "\n" + read_script(name))


class RedisContextStore:
    """`ContextStore` on Redis, shared by every coordinator using the same prefix."""

    def __init__(self, client: Redis, prefix: str) -> None:
        self._client = client
        self._prefix = prefix
        self._create = _context_script(client, "context_create")
        self._read = _context_script(client, "context_read")
        self._write = _context_script(client, "context_write")
        self._append = _context_script(client, "context_append")
        self._delete = _context_script(client, "context_delete")
        self._hold = _context_script(client, "context_hold")
        self._secret = _context_script(client, "context_secret")

    @translate_errors
    async def create(
        self,
        context_id: str,
        document: bytes,
        names: Collection[str],
        ttl_s: float,
        access: bytes = b"",
    ) -> bool:
        created = await self._create(
            keys=[self._key(context_id)], args=[document, _names(names), to_ms(ttl_s), access]
        )
        return bool(created)

    @translate_errors
    async def access(self, context_id: str) -> bytes | None:
        """One `HMGET` of the version and the access field: no renewal, no script."""
        version, access = await self._client.hmget(self._key(context_id), ["ver", "acl"])
        if version is None:
            return None
        return cast(bytes, access or b"")

    @translate_errors
    async def read(self, context_id: str, lists: Collection[str] | None) -> StoredContext | None:
        selection = ["all"] if lists is None else ["some", *lists]
        reply = await self._read(keys=[self._key(context_id)], args=selection)
        if reply is None:
            return None
        document, version, pttl_ms, names, flat, segments_read = reply
        loaded = {
            cast(bytes, name).decode(): cast(list[bytes], items)
            for name, items in zip(flat[::2], flat[1::2], strict=True)
        }
        return StoredContext(
            document=document,
            version=int(version),
            expires_in_s=max(0, int(pttl_ms)) / 1000,
            lists=loaded,
            list_names=frozenset(name.decode() for name in names),
            segments_read=int(segments_read),
            bytes_read=len(document) + sum(len(i) for items in loaded.values() for i in items),
        )

    @translate_errors
    async def write(
        self,
        context_id: str,
        document: bytes,
        names: Collection[str],
        *,
        version: int,
        drop_lists: Collection[str] = (),
    ) -> ContextWrite:
        reply = await self._write(
            keys=[self._key(context_id)], args=[version, document, _names(names), *drop_lists]
        )
        return _decode_write(reply)

    @translate_errors
    async def append(
        self,
        context_id: str,
        name: str,
        items: Sequence[bytes],
        *,
        version: int | None,
        policy: SegmentPolicy,
    ) -> ContextWrite:
        reply = await self._append(
            keys=[self._key(context_id)],
            args=[
                "" if version is None else version,
                name,
                policy.items,
                policy.max_bytes,
                policy.max_segments,
                *items,
            ],
        )
        return _decode_write(reply)

    @translate_errors
    async def delete(self, context_id: str) -> bool:
        return bool(await self._delete(keys=[self._key(context_id)]))

    @translate_errors
    async def hold(self, context_ids: Collection[str], hold_s: float) -> int:
        """One script per context (they may live in different cluster slots), pipelined."""
        ids, held = list(context_ids), 0
        for start in range(0, len(ids), HOLD_BATCH):
            async with self._client.pipeline(transaction=False) as pipe:
                for context_id in ids[start : start + HOLD_BATCH]:
                    await self._hold(
                        keys=[self._key(context_id)], args=[to_ms(hold_s)], client=pipe
                    )
                held += sum(int(found) for found in await pipe.execute())
        return held

    async def sweep(self) -> Swept:
        """Redis expires contexts and segments by itself: nothing is left to remove."""
        return Swept(0, 0)

    @translate_errors
    async def shared_secret(self, candidate: bytes) -> bytes:
        secret = await self._secret(
            keys=[join_key(self._prefix, "context-secret")], args=[candidate]
        )
        return cast(bytes, secret)

    def _key(self, context_id: str) -> str:
        return join_key(self._prefix, "ctx", f"{{{context_id}}}")


def _names(names: Collection[str]) -> bytes:
    """The document's top-level fields as the JSON array the append script checks."""
    return orjson.dumps(sorted(names))


def _decode_write(reply: list[bytes | int]) -> ContextWrite:
    state = cast(WriteState, cast(bytes, reply[0]).decode())
    return ContextWrite(state, int(reply[1]), max(0, int(reply[2])) / 1000)
