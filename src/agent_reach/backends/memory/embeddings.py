"""Card-text vectors in memory, least recently used first out past a byte bound."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

# 64 MiB: the vectors of ~16,000 card texts at 1,024 float32 dimensions, or ~40,000 at 384.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


class MemoryEmbeddingStore:
    """`EmbeddingStore` in one process's memory."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._max_bytes = max_bytes
        self._bytes = 0
        self._vectors: OrderedDict[tuple[str, str], bytes] = OrderedDict()

    async def get_many(self, model: str, texts: Sequence[str]) -> list[bytes | None]:
        found: list[bytes | None] = []
        for text in texts:
            vector = self._vectors.get((model, text))
            if vector is not None:
                self._vectors.move_to_end((model, text))
            found.append(vector)
        return found

    async def put_many(self, model: str, vectors: Sequence[tuple[str, bytes]]) -> None:
        for text, vector in vectors:
            old = self._vectors.pop((model, text), None)
            self._bytes += len(vector) - (len(old) if old is not None else 0)
            self._vectors[(model, text)] = vector
        while self._bytes > self._max_bytes and self._vectors:
            _, evicted = self._vectors.popitem(last=False)
            self._bytes -= len(evicted)
