"""API key records in Redis: one hash per key id, digests only.

Keys under ``<prefix>:``: ``apikey:<key id>`` (fields of the record) and ``apikeys``
(the set of ids, for listing).
"""

from __future__ import annotations

from typing import cast

import orjson
from redis.asyncio import Redis
from redis.typing import EncodableT, FieldT

from agent_reach.backends.redis.errors import translate_errors
from agent_reach.backends.redis.keys import join_key
from agent_reach.backends.redis.scripts import register_script
from agent_reach.model.keys import KeyRecord, Role


class RedisKeyStore:
    """`KeyStore` on Redis, shared by every coordinator: a revocation is seen by all."""

    def __init__(self, client: Redis, prefix: str) -> None:
        self._client = client
        self._prefix = prefix
        self._listing = join_key(prefix, "apikeys")
        self._revoke = register_script(client, "apikey_revoke")

    @translate_errors
    async def put(self, record: KeyRecord) -> None:
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.hset(self._key(record.key_id), mapping=_encode(record))
            pipe.sadd(self._listing, record.key_id)
            await pipe.execute()

    @translate_errors
    async def get(self, key_id: str) -> KeyRecord | None:
        fields = cast(dict[bytes, bytes], await self._client.hgetall(self._key(key_id)))
        return _decode(key_id, fields) if fields else None

    @translate_errors
    async def revoke(self, key_id: str) -> bool:
        return bool(await self._revoke(keys=[self._key(key_id)]))

    @translate_errors
    async def list(self) -> list[KeyRecord]:
        ids = sorted(
            m.decode() for m in cast(set[bytes], await self._client.smembers(self._listing))
        )
        async with self._client.pipeline(transaction=False) as pipe:
            for key_id in ids:
                pipe.hgetall(self._key(key_id))
            rows = cast(list[dict[bytes, bytes]], await pipe.execute())
        return [_decode(key_id, fields) for key_id, fields in zip(ids, rows, strict=True) if fields]

    def _key(self, key_id: str) -> str:
        return join_key(self._prefix, "apikey", key_id)


def _encode(record: KeyRecord) -> dict[FieldT, EncodableT]:
    return {
        "digest": record.digest,
        "principal": record.principal,
        "domain": record.domain or "",  # no domain: the empty string (a domain is 1+ chars)
        "role": record.role,
        "created_at": repr(record.created_at),
        "revoked": "1" if record.revoked else "0",
        "capabilities": orjson.dumps(record.capabilities),
    }


def _decode(key_id: str, fields: dict[bytes, bytes]) -> KeyRecord:
    text = {k.decode(): v.decode() for k, v in fields.items()}
    return KeyRecord(
        key_id=key_id,
        digest=text["digest"],
        principal=text["principal"],
        domain=text["domain"] or None,
        role=cast(Role, text["role"]),
        created_at=float(text["created_at"]),
        revoked=text["revoked"] == "1",
        capabilities=tuple(orjson.loads(text.get("capabilities", "[]"))),
    )
