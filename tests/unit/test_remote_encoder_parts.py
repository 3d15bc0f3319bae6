"""The remote encoder's parts on plain data: which encoder is asked for, what counts as a
usable answer, and the memory cache's byte bound."""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest

from agent_reach.backends.memory.embeddings import MemoryEmbeddingStore
from agent_reach.config import Settings
from agent_reach.policy.policy import Policy
from agent_reach.routing.encoders.remote import _vectors_of
from agent_reach.routing.encoders.spec import encoder_spec


def _answer(rows: list[list[float]]) -> bytes:
    data = [{"object": "embedding", "index": i, "embedding": r} for i, r in enumerate(rows)]
    return orjson.dumps({"object": "list", "data": data}, option=orjson.OPT_SERIALIZE_NUMPY)


def test_no_url_anywhere_means_the_packaged_encoder() -> None:
    assert encoder_spec(Settings(), Policy()) is None


def test_the_policy_section_wins_over_the_settings_field_by_field() -> None:
    settings = Settings(
        embedding_url="http://tei.internal:8080/",
        embedding_model="bge-m3",
        embedding_api_key="sk-1",
        embedding_query_prefix="query: ",
    )
    policy = Policy.model_validate(
        {"embedding": {"model": "e5-large", "passage_prefix": ""}}
    )

    spec = encoder_spec(settings, policy)

    assert spec is not None
    assert (spec.url, spec.model, spec.api_key) == ("http://tei.internal:8080", "e5-large", "sk-1")
    assert (spec.query_prefix, spec.passage_prefix) == ("query: ", "")
    assert spec.label == "remote:e5-large"


def test_input_types_are_sent_only_when_set_the_policy_winning() -> None:
    settings = Settings(
        embedding_url="http://nim.internal/v1",
        embedding_query_input_type="query",
        embedding_passage_input_type="passage",
    )
    spec = encoder_spec(settings, Policy())
    assert spec is not None
    assert (spec.query_input_type, spec.passage_input_type) == ("query", "passage")

    voyage = Policy.model_validate({"embedding": {"passage_input_type": "document"}})
    spec = encoder_spec(settings, voyage)
    assert spec is not None
    assert (spec.query_input_type, spec.passage_input_type) == ("query", "document")

    plain = encoder_spec(Settings(embedding_url="http://tei.internal/v1"), Policy())
    assert plain is not None
    assert (plain.query_input_type, plain.passage_input_type) == (None, None)


def test_an_answer_becomes_unit_vectors_in_index_order() -> None:
    data = [
        {"index": 1, "embedding": [0.0, 2.0]},
        {"index": 0, "embedding": [3.0, 4.0]},
    ]
    vectors = _vectors_of(orjson.dumps({"data": data}), 2, None)

    np.testing.assert_allclose(vectors, [[0.6, 0.8], [0.0, 1.0]], rtol=1e-6)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (_answer([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]), "dimension 3, expected 2"),
        (_answer([[1.0, 0.0]]), "1 vectors for 2 texts"),
        (_answer([[1.0, 0.0], [0.0, 0.0]]), "a zero vector"),
        (_answer([[1.0, 0.0], [1.0]]), "not lists of numbers of one length"),
        (b'{"data": [{"embedding": [NaN, 1.0]}, {"embedding": [1.0, 1.0]}]}', "not an"),
        (_answer([[math.inf, 0.0], [1.0, 0.0]]), "NaN or infinity"),  # sent as null
        (_answer([[1e39, 0.0], [1.0, 0.0]]), "NaN or infinity"),  # past float32
        (b'{"error": "overloaded"}', "not an embeddings answer"),
        (b"<html>", "not an embeddings answer"),
    ],
)
def test_a_malformed_answer_is_refused_with_its_reason(content: bytes, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        _vectors_of(content, 2, 2)


async def test_the_memory_cache_drops_the_least_recently_used_past_its_bound() -> None:
    vector = np.ones(4, dtype=np.float32).tobytes()  # 16 bytes
    store = MemoryEmbeddingStore(max_bytes=32)
    await store.put_many("m", [("a", vector), ("b", vector)])
    assert await store.get_many("m", ["a"]) == [vector]  # "a" is now the most recent

    await store.put_many("m", [("c", vector)])

    assert await store.get_many("m", ["a", "b", "c"]) == [vector, None, vector]
