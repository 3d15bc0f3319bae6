"""Lexical matcher: TF-IDF over word and character n-grams; no model, Chinese and English.

Latin-script text is split into words (unigrams and bigrams); runs of Chinese characters,
which have no spaces, become character 1- to 3-grams, so no dictionary or tokenizer is
needed. Each capability is scored by the mean of two cosines: with its nearest card text
(tag, description or example) and with the centroid of all of them. Postings are numpy
arrays, so a query costs a handful of vector operations whatever the catalog's size.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from agent_reach.routing.catalog import CapabilityCard
from agent_reach.routing.matchers.protocol import MIN_REPORTED, NOBODY, TOP_K, card_texts

WORD_NGRAMS = (1, 2)
# Chinese character 1- to 3-grams: most Chinese words are one to three characters long,
# so these cover them without a dictionary (a tokenizer such as jieba was not needed).
CJK_NGRAMS = (1, 2, 3)
# Raw score: softmax over the best TOP_K capabilities plus a "none of
# them" option scored as a cosine of NONE_AT, at SHARPNESS. The maximum-likelihood point
# on CLINC150 val (out-of-scope rows as "none") is 30 / 0.125; 20 / 0.15, next to it,
# keeps runner-up capabilities visible in explanations (30 rounds them to 0).
SHARPNESS = 20.0
NONE_AT = 0.15

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+")
_IS_CJK = re.compile(rf"[{_CJK}]")


def features(text: str) -> Counter[str]:
    """Word 1-2-grams of Latin-script words and character 1-3-grams of Chinese runs."""
    grams: Counter[str] = Counter()
    words: list[str] = []
    for run in _TOKEN.findall(text):
        if _IS_CJK.match(run):
            for n in CJK_NGRAMS:
                grams.update(run[i : i + n] for i in range(len(run) - n + 1))
        else:
            words.append(run)
    for n in WORD_NGRAMS:
        grams.update(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))
    return grams


@dataclass(frozen=True, slots=True)
class _Postings:
    """Feature id -> the rows (card texts or capabilities) that hold it, with weights."""

    starts: list[int]
    rows: np.ndarray
    weights: np.ndarray
    n_rows: int

    @classmethod
    def build(
        cls,
        feature_ids: np.ndarray,
        rows: np.ndarray,
        weights: np.ndarray,
        *,
        n_features: int,
        n_rows: int,
    ) -> _Postings:
        order = np.argsort(feature_ids, kind="stable")
        ends = np.cumsum(np.bincount(feature_ids, minlength=n_features))
        return cls([0, *ends.tolist()], rows[order], weights[order], n_rows)

    def gather(self, ids: Sequence[int], query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every posting of the query's features: its row and its share of the cosine."""
        spans = [(self.starts[i], self.starts[i + 1]) for i in ids]
        rows = np.concatenate([self.rows[a:b] for a, b in spans])
        weights = np.concatenate([self.weights[a:b] for a, b in spans])
        weights *= np.repeat(query, [b - a for a, b in spans])
        return rows, weights


@dataclass(frozen=True, slots=True)
class _Index:
    capabilities: tuple[str, ...]
    vocabulary: dict[str, int]
    idf: np.ndarray
    unseen_idf: float
    postings: _Postings  # rows: every card text, then every capability's centroid
    owner: np.ndarray  # the capability of each card text

    def similarity(self, grams: Counter[str]) -> np.ndarray | None:
        """Per capability: mean of the nearest-text and centroid cosines; None if no overlap."""
        ids: list[int] = []
        tf: list[float] = []
        unseen = 0.0  # unseen n-grams lengthen the query: text mostly new scores lower
        for gram, count in grams.items():
            weight = 1.0 + math.log(count)
            i = self.vocabulary.get(gram)
            if i is None:
                unseen += (weight * self.unseen_idf) ** 2
            else:
                ids.append(i)
                tf.append(weight)
        if not ids:
            return None
        query = np.asarray(tf) * self.idf[ids]
        query /= math.sqrt(float(query @ query) + unseen)
        rows, shares = self.postings.gather(ids, query)
        cosine = np.bincount(rows, weights=shares, minlength=self.postings.n_rows)
        n_texts = len(self.owner)
        hit = np.unique(rows[rows < n_texts])
        hit = hit[np.argsort(cosine[hit])]  # ascending: the nearest text of each is written last
        nearest = np.zeros(len(self.capabilities))
        nearest[self.owner[hit]] = cosine[hit]
        return (nearest + cosine[n_texts:]) / 2


class LexicalMatcher:
    """TF-IDF n-gram matching with calibrated confidences; refits in milliseconds."""

    name = "lexical"

    def __init__(self) -> None:
        self._grams: dict[str, Counter[str]] = {}
        self._index: _Index | None = None

    def fit(self, catalog: Mapping[str, CapabilityCard], background: Sequence[str] = ()) -> None:
        """Rebuild the index; n-grams of texts seen in earlier fits are reused. The
        background is not used: "none of them" is a fixed cosine here (NONE_AT)."""
        texts = {tag: card_texts(card) for tag, card in catalog.items()}
        known = self._grams
        grams = {t: known.get(t) or features(t) for group in texts.values() for t in group}
        self._index = _build(texts, grams)
        self._grams = grams

    def trial(
        self, catalog: Mapping[str, CapabilityCard], background: Sequence[str] = ()
    ) -> _Trial:
        texts = {tag: card_texts(card) for tag, card in catalog.items()}
        known = self._grams
        grams = {t: known.get(t) or features(t) for group in texts.values() for t in group}
        return _Trial(_build(texts, grams))

    async def scores(self, text: str, without: frozenset[str] = NOBODY) -> dict[str, float]:
        return _scores(self._index, text, without)


@dataclass(frozen=True, slots=True)
class _Trial:
    index: _Index | None

    def score_many(self, texts: list[str]) -> list[dict[str, float]]:
        return [_scores(self.index, text) for text in texts]


def _scores(index: _Index | None, text: str, without: frozenset[str] = NOBODY) -> dict[str, float]:
    if index is None:
        return {}
    similarity = index.similarity(features(text))
    if similarity is None:
        return {}
    if without:  # "not them": they leave the softmax, the rest and "none" share it
        similarity = np.where([tag in without for tag in index.capabilities], -np.inf, similarity)
    return _softmax_with_none(index.capabilities, similarity)


def _build(texts: dict[str, tuple[str, ...]], grams: dict[str, Counter[str]]) -> _Index | None:
    vocabulary: dict[str, int] = {}
    feature_ids: list[int] = []
    row_ids: list[int] = []
    counts: list[int] = []
    owner: list[int] = []
    for cap, group in enumerate(texts.values()):
        for text in group:
            row = len(owner)
            owner.append(cap)
            for gram, count in grams[text].items():
                feature_ids.append(vocabulary.setdefault(gram, len(vocabulary)))
                row_ids.append(row)
                counts.append(count)
    if not feature_ids:
        return None
    features_ = np.asarray(feature_ids)
    rows = np.asarray(row_ids)
    n_features = len(vocabulary)
    # Smoothed IDF and sublinear TF, as scikit-learn's TfidfVectorizer(sublinear_tf=True).
    idf = np.log((1 + len(owner)) / (1 + np.bincount(features_, minlength=n_features))) + 1
    weights = (1 + np.log(np.asarray(counts, dtype=np.float64))) * idf[features_]
    weights /= np.sqrt(np.bincount(rows, weights=weights**2))[rows]
    caps = np.asarray(owner)[rows]
    keys, inverse = np.unique(caps * n_features + features_, return_inverse=True)
    summed = np.bincount(inverse, weights=weights)
    centroid_caps = keys // n_features
    centroid = summed / np.sqrt(np.bincount(centroid_caps, weights=summed**2))[centroid_caps]
    return _Index(
        capabilities=tuple(texts),
        vocabulary=vocabulary,
        idf=idf,
        unseen_idf=math.log(1 + len(owner)) + 1,
        postings=_Postings.build(
            np.concatenate([features_, keys % n_features]),
            np.concatenate([rows, len(owner) + centroid_caps]),
            np.concatenate([weights, centroid]),
            n_features=n_features,
            n_rows=len(owner) + len(texts),
        ),
        owner=np.asarray(owner),
    )


def _softmax_with_none(capabilities: tuple[str, ...], similarity: np.ndarray) -> dict[str, float]:
    """Softmax over the best TOP_K and a "none of them" option: unrelated text scores ~0."""
    n = len(similarity)
    top = np.argpartition(-similarity, TOP_K)[:TOP_K] if n > TOP_K else np.arange(n)
    logits = SHARPNESS * np.append(similarity[top], NONE_AT)
    odds = np.exp(logits - logits.max())
    confidence = odds[:-1] / odds.sum()
    return {
        capabilities[i]: round(c, 6)
        for i, c in zip(top.tolist(), confidence.tolist(), strict=True)
        if c >= MIN_REPORTED and similarity[i] > -np.inf
    }
