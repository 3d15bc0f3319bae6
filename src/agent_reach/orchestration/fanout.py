"""Text fan-out: one utterance asking two things becomes a parallel workflow.

`POST /v1/invoke {"text", "mode": "fanout"}`: the text is cut into clauses at
sentence punctuation and connectives (查一下订单888的状态，再看看物流到哪了 -> two
clauses); each clause is routed. When two or more clauses are confidently matched to
different capabilities, they run as one workflow of text steps in parallel and the
answer carries each part; otherwise the whole text is one plain invoke.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from agent_reach.errors import ReachError
from agent_reach.invoke.service import InvokeService
from agent_reach.model.invocations import InvokeRequest, RouteRequest
from agent_reach.model.keys import Principal
from agent_reach.model.workflows import RunOptions, StepSpec, WorkflowBody
from agent_reach.observability.tracecontext import TraceContext
from agent_reach.orchestration.service import Orchestrator
from agent_reach.routing.service import RoutingService
from agent_reach.wire.answer import Answer

CONFIDENT_RULES = frozenset({"exact", "best"})  # not a margin refusal, not the generic agent
MAX_PARTS = 8  # clauses of one utterance run as parts; beyond that the text is one request
MIN_CLAUSE_CHARS = 2
_CLAUSE_BREAK = re.compile(
    r"[，,。；;！!？?\n]+"  # sentence and clause punctuation
    r"|(?:然后|再看看|再查查|另外|还有|并且|顺便)"  # connectives that start a second request
    r"|\b(?:and then|and also|also)\b",
    re.IGNORECASE,
)


def clauses(text: str) -> list[str]:
    """The text's clauses, in order; connectives that start a clause stay out of it."""
    parts = [part.strip(" \t、") for part in _CLAUSE_BREAK.split(text)]
    return [part for part in parts if len(part) >= MIN_CLAUSE_CHARS]


class Fanout:
    """Answers `mode: "fanout"` requests for the invoke path."""

    def __init__(
        self, invoke: InvokeService, routing: RoutingService, orchestrator: Orchestrator
    ) -> None:
        self.invoke = invoke
        self.routing = routing
        self.orchestrator = orchestrator

    async def answer(
        self,
        request: InvokeRequest,
        trace: TraceContext,
        *,
        hop_budget: int | None,
        deadline_ms: int | None,
        principal: Principal,
    ) -> Answer:
        """A parallel workflow of the text's parts, or a plain invoke of the whole."""
        parts = await self._parts(request, trace, principal) if request.capability is None else []
        if len(parts) < 2:
            plain = request.model_copy(update={"mode": "sync"})
            return await self.invoke.handle(
                plain, trace, hop_budget=hop_budget, deadline_ms=deadline_ms, principal=principal
            )
        body = WorkflowBody(
            intent="fanout",
            steps=[
                StepSpec(id=f"part-{i + 1}", text=clause, param=request.payload)
                for i, clause in enumerate(parts)
            ],
        )
        options = RunOptions(
            context_id=request.context_id,
            request_id=request.request_id,
            deadline_s=None if deadline_ms is None else max(deadline_ms, 1) / 1000,
            max_hop=request.max_hop,
        )
        try:
            answer = await self.orchestrator.start(
                body, options, {}, principal, trace, hop_budget=hop_budget
            )
        except ReachError as exc:  # the invoke path answers, it never raises
            exc.details.setdefault("trace_id", trace.trace_id)
            return Answer.of_error(exc)
        view = orjson.loads(answer.body)
        if isinstance(view.get("steps"), list):
            view["mode"] = "fanout"
            view["parts"] = [
                _part(clause, step) for clause, step in zip(parts, view["steps"], strict=False)
            ]
        return Answer.of(answer.status, view)

    async def _parts(
        self, request: InvokeRequest, trace: TraceContext, principal: Principal
    ) -> list[str]:
        """The clauses confidently matched to different capabilities `principal` may
        invoke (fewer than 2: none)."""
        found = clauses(request.text or "")
        if not 2 <= len(found) <= MAX_PARTS:
            return []
        chosen: list[str] = []
        capabilities: set[str] = set()
        allowed = self.invoke.gate.routable(principal)
        for clause in found:
            decision = await self.routing.route(
                RouteRequest(text=clause, context_id=request.context_id),
                request_id=request.request_id or "fanout",
                trace_id=trace.trace_id,
                parent_span_id=trace.parent_span_id,
                allowed=allowed,
            )
            capability = decision.capability
            if decision.rule in CONFIDENT_RULES and capability and capability not in capabilities:
                capabilities.add(capability)
                chosen.append(clause)
        return chosen if len(chosen) >= 2 else []


def _part(clause: str, step: dict[str, Any]) -> dict[str, Any]:
    return {
        "text": clause,
        "capability": step.get("capability"),
        "status": step.get("status"),
        "agent_id": step.get("agent_id"),
        "result": step.get("result"),
    }
