"""Ranked candidates (`routing/ranking.py`) on plain data: the router's matches first, the
semantic index for the rest, only what the caller may use, and an index that encodes
only the card texts it has never seen, reads the catalog in the order of a full stable
sort, and kept up to date holds and ranks exactly what one built afresh would."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_reach.backends.protocols import InstanceRecord
from agent_reach.clock import ManualClock
from agent_reach.config import Settings
from agent_reach.model.agents import AgentSpec
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.catalog import build_catalog
from agent_reach.routing.matchers.pipeline import MatchingPipeline
from agent_reach.routing.matchers.protocol import card_texts
from agent_reach.routing.ranking import (
    CandidateRanking,
    SemanticIndex,
    _best_first,
    schema_summary,
)

# a word -> a dimension: texts sharing words are near, as a sentence encoder's would be
WORDS = ["parcel", "refund", "invoice", "weather", "salary", "leave", "coupon", "stock"]
TOOLS = {
    "shop.track": "track my parcel",
    "shop.refund": "refund money",
    "shop.invoice": "invoice copy",
    "shop.coupon": "apply a coupon",
    "shop.stock": "stock of a product",
    "hr.salary": "salary payment",
    "hr.leave": "leave and vacation",
}


class WordEncoder:
    """A bag of known words as a vector; counts every text it encodes."""

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.encoded += texts
        rows = np.full((len(texts), len(WORDS) + 1), 0.01, dtype=np.float32)
        for row, text in enumerate(texts):
            for column, word in enumerate(WORDS):
                rows[row, column] += text.count(word)
        return rows


def index_of(tools: dict[str, str], examples: int = 0) -> RegistryIndex:
    """One agent per tool; with `examples`, each says its description that many ways."""
    index = RegistryIndex()
    for tag, description in tools.items():
        said = [f"{description} {n}" for n in range(examples)]
        spec = AgentSpec(
            id=tag.replace(".", "-"),
            capabilities=[tag],
            skills=[{"capability": tag, "description": description, "examples": said}],
            transport={"endpoint": "http://127.0.0.1:9/invoke"},
        )
        index.upsert(InstanceRecord(spec, 0.0), float("inf")).health = "healthy"
    return index


LEXICAL = Policy(matchers=["lexical"])


@pytest.fixture
async def ranking() -> CandidateRanking:
    index = index_of(TOOLS)
    pipeline = MatchingPipeline(index, ManualClock(), Settings())
    encoder = WordEncoder()
    ranking = CandidateRanking(index, pipeline, SemanticIndex(lambda: encoder))
    await pipeline.ready(LEXICAL)
    return ranking


async def test_on_a_calibrated_catalog_the_router_s_matches_lead() -> None:
    index = index_of(TOOLS, examples=6)
    pipeline = MatchingPipeline(index, ManualClock(), Settings())
    ranking = CandidateRanking(index, pipeline, SemanticIndex(WordEncoder))
    await pipeline.ready(LEXICAL)
    text = "where is my parcel, I want a refund"
    matched = await ranking.matching.match(text, LEXICAL)
    assert matched.text.calibrated
    head = [m.capability for m in matched.matches]
    ranked = await ranking.rank(text, LEXICAL, _all, 7)
    assert [r.capability for r in ranked][: len(head)] == head
    assert [r.confidence for r in ranked][: len(head)] == [m.confidence for m in matched.matches]
    assert all(r.similarity is None for r in ranked[: len(head)])
    tail = ranked[len(head) :]
    assert tail and all(r.confidence == 0.0 and r.similarity is not None for r in tail)
    assert sorted({r.capability for r in ranked}) == sorted(TOOLS)  # every one, once


async def test_nothing_the_caller_may_not_use_is_ranked(ranking: CandidateRanking) -> None:
    def only_hr(tag: str) -> bool:
        return tag.startswith("hr.")

    for text in ("track my parcel", "salary", "nothing at all"):
        ranked = await ranking.rank(text, LEXICAL, only_hr, 5)
        assert {r.capability for r in ranked} == {"hr.salary", "hr.leave"}
    ranked = await ranking.rank("when is my salary paid", LEXICAL, only_hr, 1)
    assert [r.capability for r in ranked] == ["hr.salary"]


async def test_the_index_ranks_by_the_nearest_card_text(ranking: CandidateRanking) -> None:
    ranked = await ranking.rank("zzz", LEXICAL, lambda tag: tag != "shop.track", 6)
    assert not (await ranking.matching.match("zzz", LEXICAL)).matches  # no word in common
    similarities = [r.similarity for r in ranked]
    assert None not in similarities and similarities == sorted(similarities, reverse=True)
    assert len(ranked) == 6 and "shop.track" not in {r.capability for r in ranked}
    ranked = await ranking.rank("coupon coupon", LEXICAL, lambda tag: tag.startswith("shop"), 3)
    assert ranked[0].capability == "shop.coupon"


async def test_a_registration_encodes_only_the_new_card_text() -> None:
    encoder = WordEncoder()
    semantic = SemanticIndex(lambda: encoder)
    index = index_of(TOOLS)
    first = semantic.fill(build_catalog(index))
    assert len(encoder.encoded) == len(first.tags) * 2  # each card: its tag and description
    grown = index_of({**TOOLS, "shop.weather": "weather of the delivery day"})
    encoder.encoded.clear()
    fill = semantic.fill(build_catalog(grown))
    assert sorted(encoder.encoded) == ["shop weather", "weather of the delivery day"]
    assert next(fill.nearest(semantic.encode(["weather"])[0]))[0] == "shop.weather"
    encoder.encoded.clear()
    semantic.fill(build_catalog(index))  # one gone: nothing to encode, its texts dropped
    assert encoder.encoded == []
    assert semantic.size == len(first.tags) * 2


def test_a_schema_summary_says_types_enums_and_what_is_required() -> None:
    schema = {
        "type": "object",
        "properties": {
            "order_no": {"type": "string", "pattern": "[0-9]+"},
            "speed": {"enum": ["fast", "slow"]},
            "note": {"type": ["string", "null"]},
            "odd": True,
            "bare": {},
        },
        "required": ["order_no", 3],
    }
    assert schema_summary(schema) == {
        "properties": {
            "order_no": "string",
            "speed": {"enum": ["fast", "slow"]},
            "note": ["string", "null"],
            "odd": "any",
            "bare": "any",
        },
        "required": ["order_no"],
    }
    assert schema_summary(None) is None
    assert schema_summary({"type": "object", "properties": "garbled"}) == {
        "properties": {},
        "required": [],
    }


async def test_the_text_is_not_encoded_when_the_router_listed_everything_allowed() -> None:
    index = index_of(TOOLS, examples=6)
    pipeline = MatchingPipeline(index, ManualClock(), Settings())
    encoder = WordEncoder()
    ranking = CandidateRanking(index, pipeline, SemanticIndex(lambda: encoder))
    await pipeline.ready(LEXICAL)
    ranked = await ranking.rank("salary and leave", LEXICAL, lambda t: t.startswith("hr."), 5)
    assert {r.capability for r in ranked} == {"hr.salary", "hr.leave"}
    assert encoder.encoded == []  # the index was never needed
    await ranking.rank("salary and leave", LEXICAL, _all, len(TOOLS))
    assert "salary and leave" in encoder.encoded


def _all(tag: str) -> bool:
    return True


class SidedWordEncoder(WordEncoder):
    """A sided encoder (as the remote one): requests' texts are embedded as queries."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        self.queries += texts
        return WordEncoder().encode(texts)


async def test_the_caller_s_text_is_embedded_as_a_query_card_texts_as_passages() -> None:
    index = index_of(TOOLS)
    pipeline = MatchingPipeline(index, ManualClock(), Settings())
    encoder = SidedWordEncoder()
    ranking = CandidateRanking(index, pipeline, SemanticIndex(lambda: encoder))
    await pipeline.ready(LEXICAL)

    ranked = await ranking.rank("Coupon coupon please", LEXICAL, _all, 7)

    assert ranked[0].capability == "shop.coupon"
    assert encoder.queries == ["coupon coupon please"]  # normalized, as a query
    cards = {text for tag, d in TOOLS.items() for text in (d, tag.replace(".", " "))}
    assert set(encoder.encoded) == cards  # passages: the card texts only


DIMENSIONS = 16


class HashEncoder:
    """Each word adds to a dimension of its own hash: a deterministic sentence vector."""

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.encoded += texts
        rows = np.full((len(texts), DIMENSIONS), 0.01, dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.split():
                rows[row, zlib.crc32(word.encode()) % DIMENSIONS] += 1.0
        return rows


@given(st.lists(st.sampled_from([0.0, -0.25, 0.1, 0.5, 0.5001, 0.9, -1.0]), max_size=400))
def test_the_index_reads_the_catalog_in_the_order_of_a_full_stable_sort(
    scores: list[float],
) -> None:
    array = np.asarray(scores, dtype=np.float32)  # many ties, across several chunks
    assert list(_best_first(array)) == np.argsort(-array, kind="stable").tolist()


CATALOGS = [
    TOOLS,
    {**TOOLS, "shop.weather": "weather of the delivery day"},  # one more
    # a text two capabilities share, and one changed description
    {**TOOLS, "shop.weather": "refund money", "hr.leave": "leave and paid holidays"},
    {t: d for t, d in TOOLS.items() if t != "shop.invoice"},  # one gone
    {},
    TOOLS,
]
QUERIES = ["refund my money", "weather", "leave and salary", "zzz"]


def test_an_index_kept_up_to_date_ranks_as_one_built_afresh() -> None:
    encoder = HashEncoder()
    kept = SemanticIndex(lambda: encoder)
    for tools in CATALOGS:
        cards = build_catalog(index_of(tools))
        texts = {t for card in cards.values() for t in card_texts(card)}
        before = kept.texts()
        encoder.encoded.clear()
        fill = kept.fill(cards)
        fresh = SemanticIndex(HashEncoder).fill(cards)
        assert sorted(encoder.encoded) == sorted(texts - before)  # only the new texts
        assert kept.texts() == texts  # the texts of capabilities gone are dropped
        assert fill.tags == fresh.tags
        assert np.array_equal(fill.starts, fresh.starts)
        assert np.array_equal(fill.vectors, fresh.vectors)
        for text in QUERIES:
            query = kept.encode([text], query=True)[0]
            assert list(fill.nearest(query)) == list(fresh.nearest(query))
