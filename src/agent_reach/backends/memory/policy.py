"""The policy and its audit log in memory."""

from __future__ import annotations

import dataclasses
from collections import deque

from agent_reach.backends.protocols import PolicyChange, StoredPolicy

AUDIT_CAP = 1000  # policy changes are rare: a thousand covers months of edits


class MemoryPolicyStore:
    """`PolicyStore` in this process: one slot and a bounded deque, newest at the right."""

    def __init__(self, cap: int = AUDIT_CAP) -> None:
        self._stored: StoredPolicy | None = None
        self._audit: deque[PolicyChange] = deque(maxlen=cap)

    async def get(self) -> StoredPolicy | None:
        return self._stored

    async def replace(
        self,
        document: bytes,
        version: str,
        *,
        change: PolicyChange,
        expected_revision: int | None = None,
        file_digest: str | None = None,
    ) -> PolicyChange | None:
        stored = self._stored
        revision = stored.revision if stored else 0
        if expected_revision is not None and expected_revision != revision:
            return None
        if file_digest is not None and stored is not None and stored.file_digest == file_digest:
            return None
        done = dataclasses.replace(
            change, revision=revision + 1, before=stored.version if stored else None, after=version
        )
        if file_digest is None and stored is not None:
            file_digest = stored.file_digest
        self._stored = StoredPolicy(done.revision, version, document, file_digest)
        self._audit.append(done)
        return done

    async def changes(self, limit: int) -> list[PolicyChange]:
        return [self._audit[-i] for i in range(1, min(limit, len(self._audit)) + 1)]
