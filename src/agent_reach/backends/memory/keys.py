"""API key records in memory (digests only)."""

from __future__ import annotations

import dataclasses

from agent_reach.model.keys import KeyRecord


class MemoryKeyStore:
    """`KeyStore` in a dict."""

    def __init__(self) -> None:
        self._records: dict[str, KeyRecord] = {}

    async def put(self, record: KeyRecord) -> None:
        self._records[record.key_id] = record

    async def get(self, key_id: str) -> KeyRecord | None:
        return self._records.get(key_id)

    async def revoke(self, key_id: str) -> bool:
        record = self._records.get(key_id)
        if record is None:
            return False
        self._records[key_id] = dataclasses.replace(record, revoked=True)
        return True

    async def list(self) -> list[KeyRecord]:
        return list(self._records.values())
