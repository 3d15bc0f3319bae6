"""Similar-question answers: the last resort for a text request nothing could answer.

The original system: "when the routing layer cannot wait for the agent, look in the
cache for a historical answer to the same kind of question; return it marked 'may be
inaccurate', else the failure". Answers to text requests are kept per capability with
the sentence vector of their text; when a text request's delivery fails, the answer
whose text is closest (cosine at least the policy's `delivery.similar_answers`) is
served as `degraded`, with the similarity and the original request id.

Remembering is off the request path: texts wait in a bounded buffer that a background
task encodes in one batch every `FLUSH_S`. Each coordinator keeps its own index.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import structlog

from agent_reach.errors import AgentFailed, InvalidRequest, NoInstance, ReachError
from agent_reach.invoke.tasks import TaskEntry
from agent_reach.model.decisions import RouteDecision
from agent_reach.observability.metrics import Metrics
from agent_reach.policy.policy import Policy
from agent_reach.routing.matchers.embedding import Encoder, load_encoder
from agent_reach.wire.answer import Answer

log = structlog.get_logger("agent_reach.similar_answers")

PER_CAPABILITY = 512  # answers kept per capability; the oldest go first
MAX_CAPABILITIES = 1024  # capabilities indexed; more are not remembered
PENDING_MAX = 1024  # answers waiting to be encoded; the oldest are dropped past this
FLUSH_S = 0.2
_ENCODING = threading.Lock()  # one encode of ours at a time; the matcher has its own


@dataclass(frozen=True, slots=True)
class SimilarAnswer:
    """An earlier answer, how close its question was, and whose it was."""

    result: Any
    similarity: float
    request_id: str


@dataclass(slots=True)
class _Shelf:
    """One capability's answers with their vectors, oldest first."""

    vectors: deque[np.ndarray]
    answers: deque[tuple[str, Any]]  # (request id, result)


class SimilarAnswers:
    """Encodes answered texts in the background; finds the closest one when asked."""

    def __init__(
        self,
        policy: Callable[[], Policy],
        metrics: Metrics,
        encoder: Callable[[], Encoder] = load_encoder,
    ) -> None:
        self.policy = policy
        self.metrics = metrics
        self._encoder = encoder
        self._shelves: dict[str, _Shelf] = {}
        self._pending: deque[tuple[str, str, str, Any]] = deque(maxlen=PENDING_MAX)

    @property
    def is_on(self) -> bool:
        return self.policy().delivery.similar_answers is not None

    def remember(self, capability: str, text: str, request_id: str, result: Any) -> None:
        """Buffer an answered text request for indexing; never waits."""
        if self.is_on:
            self._pending.append((capability, text, request_id, result))

    async def find(self, capability: str, text: str) -> SimilarAnswer | None:
        """The closest earlier answer of `capability`, if close enough; None otherwise."""
        threshold = self.policy().delivery.similar_answers
        shelf = self._shelves.get(capability)
        if threshold is None or shelf is None or not shelf.vectors:
            return None
        try:
            query = (await self._encode([text]))[0]
        except InvalidRequest as exc:  # the embeddings extra is missing
            log.error("similar_answers_unavailable", error=exc.message)
            return None
        similarities = np.stack(list(shelf.vectors)) @ query
        best = int(np.argmax(similarities))
        similarity = float(similarities[best])
        if similarity < threshold:
            return None
        request_id, result = shelf.answers[best]
        return SimilarAnswer(result, round(similarity, 4), request_id)

    async def fallback(
        self, task: TaskEntry, decision: RouteDecision, error: ReachError
    ) -> Answer | None:
        """The degraded answer of a routed text request whose delivery failed, or None."""
        request = task.request
        if not request.text or not decision.capability:
            return None
        if not isinstance(error, AgentFailed | NoInstance):
            return None
        found = await self.find(decision.capability, request.text)
        if found is None:
            return None
        self.metrics.fallbacks.labels("similar").inc()
        self.metrics.requests.labels(decision.capability, "degraded").inc()
        return Answer.of(
            200,
            {
                "request_id": task.task_id,
                "trace_id": task.trace_id,
                "status": "degraded",
                "agent_id": None,
                "result": found.result,
                "route": decision,
                "attempts": error.attempts,
                "degraded": {
                    "reason": error.code,
                    "similarity": found.similarity,
                    "original_request_id": found.request_id,
                },
            },
        )

    async def run(self) -> None:
        """Encode and index buffered answers every `FLUSH_S`, until cancelled."""
        while True:
            await asyncio.sleep(FLUSH_S)
            if self._pending:
                await self.flush()

    async def flush(self) -> None:
        """Index every buffered answer now."""
        batch = list(self._pending)
        self._pending.clear()
        try:
            vectors = await self._encode([text for _, text, _, _ in batch])
        except InvalidRequest as exc:
            log.error("similar_answers_unavailable", error=exc.message)
            return
        for (capability, _, request_id, result), vector in zip(batch, vectors, strict=True):
            shelf = self._shelves.get(capability)
            if shelf is None:
                if len(self._shelves) >= MAX_CAPABILITIES:
                    continue
                shelf = self._shelves[capability] = _Shelf(
                    deque(maxlen=PER_CAPABILITY), deque(maxlen=PER_CAPABILITY)
                )
            shelf.vectors.append(vector)
            shelf.answers.append((request_id, result))

    async def _encode(self, texts: list[str]) -> np.ndarray:
        encoder = self._encoder()  # InvalidRequest naming the extra when it is missing

        def encode() -> np.ndarray:
            with _ENCODING:
                return np.asarray(encoder.encode(texts), dtype=np.float32)

        return await asyncio.to_thread(encode)
