"""Admission control: beyond the limits a request is answered at once, never queued.

Two limits, both counted on this coordinator with no store call: `AR_MAX_IN_FLIGHT`
(every invocation it holds) and the policy's `admission.max_in_flight` per named
capability. A request beyond either is refused before anything runs — no idempotency
claim, no route, no delivery — so the caller may send it again with the same
request_id. It gets a remembered answer of the same capability and payload marked
`degraded` where one exists (and the policy allows), else 503 `overloaded` with
`Retry-After`; both are counted in `agent_reach_shed`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import structlog

from agent_reach.errors import Overloaded, StoreUnavailable
from agent_reach.invoke.answer_memory import AnswerMemory
from agent_reach.model.invocations import InvokeRequest
from agent_reach.observability.metrics import Metrics
from agent_reach.policy.policy import Policy
from agent_reach.wire.answer import Answer

log = structlog.get_logger("agent_reach.admission")

Limit = Literal["coordinator", "capability"]


@dataclass(frozen=True, slots=True)
class Ticket:
    """An admitted request; hand it back to `leave`. `capability` when it was counted."""

    capability: str | None


_UNCOUNTED = Ticket(None)


class Admission:
    """Counts the requests in flight and refuses those beyond the limits."""

    def __init__(
        self,
        max_in_flight: int,
        policy: Callable[[], Policy],
        answers: AnswerMemory,
        metrics: Metrics,
    ) -> None:
        self.max_in_flight = max_in_flight  # 0: no coordinator-wide bound
        self.policy = policy
        self.answers = answers
        self.metrics = metrics
        self.in_flight = 0
        self._by_capability: dict[str, int] = {}
        metrics.in_flight.set_function(lambda: self.in_flight)

    def enter(self, capability: str | None) -> Ticket | Limit:
        """A ticket when admitted, else the limit that refused the request."""
        if self.max_in_flight and self.in_flight >= self.max_in_flight:
            return "coordinator"
        ticket = _UNCOUNTED
        if capability is not None:
            limit = self.policy().admission.max_in_flight.get(capability)
            if limit is not None:
                held = self._by_capability.get(capability, 0)
                if held >= limit:
                    return "capability"
                self._by_capability[capability] = held + 1
                ticket = Ticket(capability)
        self.in_flight += 1
        return ticket

    def leave(self, ticket: Ticket) -> None:
        """The admitted request has its answer."""
        self.in_flight -= 1
        if ticket.capability is not None:
            held = self._by_capability[ticket.capability] - 1
            if held:
                self._by_capability[ticket.capability] = held
            else:
                del self._by_capability[ticket.capability]

    async def refuse(
        self, request: InvokeRequest, limit: Limit, request_id: str, trace_id: str
    ) -> Answer:
        """The immediate answer of a refused request: remembered and `degraded`, else 503."""
        policy = self.policy()
        remembered = None
        if request.capability and policy.admission.degraded and policy.delivery.degraded_answers:
            try:
                remembered = await self.answers.recall(request.capability, request.payload)
            except StoreUnavailable:
                log.warning("remembered_answer_unavailable", request_id=request_id)
        if remembered is None:
            self.metrics.shed.labels(limit, "overloaded").inc()
            error = Overloaded(
                "the coordinator is at its limit of requests in flight; try again later"
                if limit == "coordinator"
                else f"{request.capability!r} is at its limit of requests in flight",
                limit=limit,
                retry_after_s=policy.admission.retry_after_s,
                request_id=request_id,
                trace_id=trace_id,
            )
            return Answer.of_error(error)
        self.metrics.shed.labels(limit, "degraded").inc()
        return Answer.of(
            200,
            {
                "request_id": request_id,
                "trace_id": trace_id,
                "status": "degraded",
                "agent_id": None,
                "result": remembered,
                "route": None,
                "attempts": [],
                "degraded": {"reason": "overloaded", "limit": limit},
            },
        )
