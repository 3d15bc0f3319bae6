"""The policy and its audit log in Redis, shared by every coordinator.

Keys under ``<prefix>:``, in one hash slot: ``{<prefix>:policy}`` (a hash: revision,
version, document, file_digest) and ``{<prefix>:policy}:audit`` (a stream of changes,
trimmed exactly to the cap). One Lua script writes both, so no change goes unrecorded
and no two writers take the same revision.
"""

from __future__ import annotations

import dataclasses
from typing import cast

from redis.asyncio import Redis, RedisCluster

from agent_reach.backends.memory.policy import AUDIT_CAP
from agent_reach.backends.protocols import PolicyChange, StoredPolicy
from agent_reach.backends.redis.errors import translate_errors
from agent_reach.backends.redis.keys import StreamEntries, hash_tag, join_key
from agent_reach.backends.redis.scripts import register_script


class RedisPolicyStore:
    """`PolicyStore` on Redis: a compare-and-set hash plus an audit stream."""

    def __init__(self, client: Redis | RedisCluster, prefix: str, cap: int = AUDIT_CAP) -> None:
        self._client = client
        tag = hash_tag(prefix, "policy")  # one slot: the script writes both keys
        self._key = join_key(prefix, tag)
        self._audit = join_key(prefix, tag, "audit")
        self._cap = cap
        self._replace = register_script(client, "policy_replace")

    @translate_errors
    async def get(self) -> StoredPolicy | None:
        fields = cast(dict[bytes, bytes], await self._client.hgetall(self._key))
        if b"document" not in fields:
            return None
        digest = fields.get(b"file_digest")
        return StoredPolicy(
            revision=int(fields[b"revision"]),
            version=fields[b"version"].decode(),
            document=fields[b"document"],
            file_digest=digest.decode() if digest else None,
        )

    @translate_errors
    async def replace(
        self,
        document: bytes,
        version: str,
        *,
        change: PolicyChange,
        expected_revision: int | None = None,
        file_digest: str | None = None,
    ) -> PolicyChange | None:
        result = cast(
            list[int | bytes],
            await self._replace(
                keys=[self._key, self._audit],
                args=[
                    "" if expected_revision is None else expected_revision,
                    document,
                    version,
                    file_digest or "",
                    repr(change.at),
                    change.by,
                    change.source,
                    self._cap,
                ],
            ),
        )
        if result[0] == 0:
            return None
        before = cast(bytes, result[2]).decode()
        return dataclasses.replace(
            change, revision=int(result[1]), before=before or None, after=version
        )

    @translate_errors
    async def changes(self, limit: int) -> list[PolicyChange]:
        if limit <= 0:
            return []
        entries = cast(StreamEntries, await self._client.xrevrange(self._audit, count=limit))
        return [_decode(fields) for _, fields in entries]


def _decode(fields: dict[bytes, bytes]) -> PolicyChange:
    text = {k.decode(): v.decode() for k, v in fields.items()}
    return PolicyChange(
        revision=int(text["revision"]),
        at=float(text["at"]),
        by=text["by"],
        source=text["source"],
        before=text["before"] or None,
        after=text["after"],
    )
