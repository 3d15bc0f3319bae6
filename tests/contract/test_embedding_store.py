"""The `EmbeddingStore` contract on every backend: vectors by (model, text), in order."""

from __future__ import annotations

import numpy as np

from agent_reach.backends.bundle import Backends


def _vector(seed: int) -> bytes:
    return np.random.default_rng(seed).random(384, dtype=np.float32).tobytes()


async def test_vectors_come_back_by_model_and_text_in_the_order_asked(backends: Backends) -> None:
    store = backends.embeddings
    assert store is not None
    await store.put_many(
        "e5-small", [("passage: 查快递", _vector(1)), ("passage: 取消订单", _vector(2))]
    )
    await store.put_many("bge-m3", [("passage: 查快递", _vector(3))])

    found = await store.get_many("e5-small", ["passage: 取消订单", "unknown", "passage: 查快递"])

    assert found == [_vector(2), None, _vector(1)]
    assert await store.get_many("bge-m3", ["passage: 查快递", "passage: 取消订单"]) == [
        _vector(3),
        None,
    ]
    assert await store.get_many("e5-small", []) == []


async def test_a_put_replaces_the_vector_of_the_same_model_and_text(backends: Backends) -> None:
    store = backends.embeddings
    assert store is not None
    await store.put_many("m", [("a text", _vector(1))])
    await store.put_many("m", [("a text", _vector(2))])

    assert await store.get_many("m", ["a text"]) == [_vector(2)]
