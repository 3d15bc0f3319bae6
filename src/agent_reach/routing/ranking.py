"""Ranked candidates: the k capabilities that fit a text best, among those a caller may use.

What the router would do with the text does not matter here: the list is given whether it
routes, refuses or asks for a clarification. It is built from two public outputs:

1. the matching pipeline's own matches, each with its calibrated confidence (the few
   capabilities the router weighs);
2. a semantic index of the whole catalog: every card text's sentence vector (the packaged
   encoder), a capability scored by the cosine of the text to its nearest card text.

The router's matches lead, in its order, and the index ranks the rest. Every catalog is
calibrated (the packaged reference set is the out-of-scope side of every calibration,
docs/routing.md), so the router's order is the better one even for description-only
tools: on MetaTool's 159-tool test catalog its right tool is first for 53.2 % and among
the first five for 73.8 % (`bench/routing.py --mode tools`), where the index alone
measured 45.8 % and 65.0 % on the 199 tools. A capability the router did not weigh has
confidence 0; `similarity` says why the index listed it.

The index is incremental: vectors are kept by card text, rows of one contiguous matrix,
so a registration encodes only the texts never seen (one more tool: its two card texts,
not the whole catalog again, while the router's own classifier refits from scratch). A
ranking puts in order only as many capabilities as it reads (a chunk at a time), so a
`top_k` 20 of 5,000 tools sorts about 64 of them, not all. It is filled in a worker thread,
never on the event loop, and only when a request needs more than the head: a `top_k`
the router's matches fill costs nothing beyond the match itself. Pure apart from that
thread: it reads the registry index and the pipeline, never a store or a socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import structlog

from agent_reach.errors import InvalidRequest
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.catalog import CapabilityCard, build_catalog
from agent_reach.routing.matchers.protocol import card_texts, normalize_text

if TYPE_CHECKING:
    from agent_reach.routing.matchers.embedding import Encoder
    from agent_reach.routing.matchers.pipeline import MatchingPipeline

log = structlog.get_logger("agent_reach.routing")

# A request that needs the index waits this long for its first fill (the encoder loads in
# about a second; 300 tools encode in about another) and this long for a refill after a
# registration (new texts only: milliseconds); past it, the index it has answers.
FIRST_FILL_WAIT_S = 10.0
REFILL_WAIT_S = 1.0
ENCODE_CHUNK = 256  # card texts encoded per lock hold, so a request's text is not held up

Allowed = Callable[[str], bool]  # may this caller invoke the capability (and is it live)


@dataclass(frozen=True, slots=True)
class RankedCapability:
    """One capability of a ranking: the router's calibrated confidence in it (0 when the
    router did not weigh it), its similarity to the text when the index ranked it, and what
    its card says: descriptions and input schema."""

    capability: str
    confidence: float
    similarity: float | None
    description: str
    input_schema: Mapping[str, Any] | None


def _packaged_encoder() -> Encoder:
    from agent_reach.routing.matchers.embedding import load_encoder

    return load_encoder()


FIRST_CHUNK = 64  # capabilities put in order first; most rankings need no more


@dataclass(frozen=True, slots=True)
class _Fill:
    """One catalog's index: capabilities, their card texts' vectors grouped by capability."""

    cards: dict[str, CapabilityCard]
    tags: tuple[str, ...]
    vectors: np.ndarray  # (texts, d), unit rows, grouped by capability in `tags` order
    starts: np.ndarray  # where each capability's group starts

    def nearest(self, query: np.ndarray) -> Iterator[tuple[str, float]]:
        """Every capability, most similar first (ties in catalog order): (tag, cosine to
        its nearest card text). Put in order a chunk at a time, as far as it is read."""
        if not self.tags:
            return
        similar = np.maximum.reduceat(self.vectors @ query, self.starts)
        for i in _best_first(similar):
            yield self.tags[i], round(float(similar[i]), 6)


def _best_first(scores: np.ndarray) -> Iterator[int]:
    """The indices of `scores`, highest first, ties by index (a stable sort of -scores),
    sorted a chunk at a time: the chunk is every score at or above the chunk's k-th
    highest, so no later score comes before it. Each chunk is four times the last."""
    at = np.arange(len(scores))
    size = FIRST_CHUNK
    while len(scores):
        if size < len(scores):
            kth = np.partition(scores, len(scores) - size)[len(scores) - size]
            head = scores >= kth
        else:
            head = np.ones(len(scores), dtype=bool)
        yield from at[head][np.argsort(-scores[head], kind="stable")].tolist()
        at, scores = at[~head], scores[~head]
        size *= 4


@dataclass(frozen=True, slots=True)
class _Kept:
    """The card texts' vectors held: one contiguous matrix, a row per text."""

    rows: dict[str, int]
    matrix: np.ndarray  # (texts, d) float32, unit rows

    def keep(self, wanted: list[str], encode: Callable[[list[str]], np.ndarray]) -> _Kept:
        """The vectors of `wanted` (distinct texts), in its order: rows held are copied,
        only the others are encoded; texts not wanted are dropped."""
        if not wanted:
            return NOTHING_KEPT
        missing = [t for t in wanted if t not in self.rows]
        fresh = encode(missing)
        width = fresh.shape[1] if missing else self.matrix.shape[1]
        matrix = np.empty((len(wanted), width), dtype=np.float32)
        at = {t: i for i, t in enumerate(wanted)}
        held = [t for t in wanted if t in self.rows]
        if held:
            into = np.fromiter((at[t] for t in held), np.intp, len(held))
            matrix[into] = self.matrix[
                np.fromiter((self.rows[t] for t in held), np.intp, len(held))
            ]
        if missing:
            matrix[np.fromiter((at[t] for t in missing), np.intp, len(missing))] = fresh
        return _Kept(at, matrix)


NOTHING_KEPT = _Kept({}, np.zeros((0, 0), dtype=np.float32))


class SemanticIndex:
    """Card texts -> sentence vectors, kept by text; filled off the event loop."""

    def __init__(self, encoder: Callable[[], Encoder] = _packaged_encoder) -> None:
        self._load = encoder
        self._encoder: Encoder | None = None
        self._kept = NOTHING_KEPT
        self._fill: _Fill | None = None
        self._job: asyncio.Task[None] | None = None
        self._encoding = threading.Lock()  # one encode at a time on this index's behalf
        self.failed: str | None = None  # why the encoder cannot be used

    @property
    def size(self) -> int:
        """Card texts held."""
        return len(self._kept.rows)

    def texts(self) -> set[str]:
        """The card texts held."""
        return set(self._kept.rows)

    def is_current(self, cards: Mapping[str, CapabilityCard]) -> bool:
        fill = self._fill
        return fill is not None and (fill.cards is cards or fill.cards == cards)

    async def filled(self, cards: dict[str, CapabilityCard]) -> _Fill | None:
        """The index of `cards`, waited for briefly; else the last one (or None)."""
        if self.failed is not None or self.is_current(cards):
            return self._fill
        if self._job is None or self._job.done():
            self._job = asyncio.create_task(self._refill(cards))
        wait_s = FIRST_FILL_WAIT_S if self._fill is None else REFILL_WAIT_S
        with contextlib.suppress(TimeoutError):  # the last index answers meanwhile
            await asyncio.wait_for(asyncio.shield(self._job), wait_s)
        return self._fill

    async def _refill(self, cards: dict[str, CapabilityCard]) -> None:
        try:
            self._fill = await asyncio.to_thread(self.fill, cards)
        except InvalidRequest as exc:  # the encoder package is missing: the head only
            self.failed = exc.message
            log.error("ranking_index_unavailable", error=exc.message)

    def fill(self, cards: dict[str, CapabilityCard]) -> _Fill:
        """The index of `cards` (worker thread): only texts never seen are encoded."""
        texts = {tag: card_texts(card) or (tag,) for tag, card in cards.items()}
        tags = tuple(texts)
        flat = [t for tag in tags for t in texts[tag]]
        kept = self._kept.keep(list(dict.fromkeys(flat)), self._encode_cards)
        self._kept = kept
        sizes = [len(texts[tag]) for tag in tags]
        starts = np.cumsum([0, *sizes[:-1]]) if tags else np.zeros(0, dtype=np.int64)
        if len(flat) == len(kept.rows):  # no text shared by two capabilities: rows in order
            matrix = kept.matrix
        else:
            matrix = kept.matrix[np.fromiter((kept.rows[t] for t in flat), np.intp, len(flat))]
        return _Fill(cards, tags, matrix, starts)  # never changed: a new catalog is a new dict

    def _encode_cards(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of card texts, ENCODE_CHUNK per lock hold."""
        chunks = [
            self.encode(texts[start : start + ENCODE_CHUNK])
            for start in range(0, len(texts), ENCODE_CHUNK)
        ]
        return np.concatenate(chunks) if chunks else np.zeros((0, 0), dtype=np.float32)

    def encode(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        """Unit vectors of `texts` (worker thread): card texts, or (`query`) a caller's
        text, which an encoder that tells them apart embeds as a query."""
        with self._encoding:
            if self._encoder is None:
                self._encoder = self._load()
            sided = getattr(self._encoder, "encode_queries", None) if query else None
            vectors = np.asarray((sided or self._encoder.encode)(texts), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms > 0, norms, 1.0)


class CandidateRanking:
    """The k best capabilities for a text among those a caller may use (see the module)."""

    def __init__(
        self,
        index: RegistryIndex,
        matching: MatchingPipeline,
        semantic: SemanticIndex | None = None,
    ) -> None:
        self.index = index
        self.matching = matching
        self.semantic = semantic or SemanticIndex()
        self._cards: tuple[int, dict[str, CapabilityCard]] | None = None

    def cards(self) -> dict[str, CapabilityCard]:
        """The registered cards, read again only when the registry changed."""
        seen = self._cards
        if seen is None or seen[0] != self.index.version:
            fresh = build_catalog(self.index)
            # the same cards as before stay the same object: the index compares them once
            seen = (self.index.version, seen[1] if seen and seen[1] == fresh else fresh)
            self._cards = seen
        return seen[1]

    async def rank(
        self, text: str, policy: Policy, allowed: Allowed, top_k: int
    ) -> list[RankedCapability]:
        """The `top_k` capabilities `allowed` that fit `text` best, best first. Fewer when
        fewer are allowed. The router's matches lead, then the catalog by similarity."""
        cards = self.cards()
        matched = await self.matching.match(text, policy)
        confidence = {m.capability: m.confidence for m in matched.matches}
        ranked = [
            _ranked(cards[m.capability], m.confidence, None)
            for m in matched.matches
            if m.capability in cards and allowed(m.capability)
        ][:top_k]
        listed = {r.capability for r in ranked}
        if len(ranked) >= top_k or not any(
            allowed(tag) for tag in cards if tag not in listed
        ):  # nothing more to list: the text need not be encoded again
            return ranked
        fill = await self.semantic.filled(cards)
        if fill is None:  # no index (yet): the router's order is all there is
            head = [m for m in matched.matches if m.capability not in listed]
            extra = [_ranked(cards[m.capability], m.confidence, None) for m in head]
            return [*ranked, *(r for r in extra if allowed(r.capability))][:top_k]
        asked = [normalize_text(text)]
        query = (await asyncio.to_thread(self.semantic.encode, asked, query=True))[0]
        for tag, similarity in fill.nearest(query):
            if tag in listed or tag not in cards or not allowed(tag):
                continue
            ranked.append(_ranked(cards[tag], confidence.get(tag, 0.0), similarity))
            if len(ranked) >= top_k:
                break
        return ranked


def _ranked(card: CapabilityCard, confidence: float, similarity: float | None) -> RankedCapability:
    description = " ".join(card.descriptions)
    return RankedCapability(card.capability, confidence, similarity, description, card.input_schema)


def schema_summary(schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What a caller needs to fill a capability's input: each property's type (its enum
    values when it has them) and the required ones; None without a schema."""
    if not schema:
        return None
    properties = schema.get("properties")
    fields: dict[str, Any] = {}
    if isinstance(properties, Mapping):
        for name, spec in properties.items():
            if not isinstance(spec, Mapping):
                fields[str(name)] = "any"
            elif isinstance(spec.get("enum"), list):
                fields[str(name)] = {"enum": spec["enum"]}
            else:
                kind = spec.get("type", "any")
                fields[str(name)] = kind if isinstance(kind, str | list) else "any"
    required = schema.get("required")
    names = [r for r in required if isinstance(r, str)] if isinstance(required, list) else []
    return {"properties": fields, "required": names}
