"""How the intent parser's agent is asked: an ordinary invocation, in the caller's trace.

The request id is a digest of the payload (text and candidates), so the same unsure
text within the idempotency ttl gets the stored answer instead of a second delivery.

The invoke path routes with the parser that asks through it (routing -> intent parser
-> invoke -> routing): the asker is given the path as a lookup, made when the parser
first asks, so each part is whole when it is built and none is completed afterwards.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import orjson

from agent_reach.errors import error_from_body
from agent_reach.invoke.service import InvokeService
from agent_reach.model.invocations import InvokeRequest
from agent_reach.observability.tracecontext import TraceContext
from agent_reach.routing.intent_parser import AskAgent


def intent_asker(invoke: Callable[[], InvokeService]) -> AskAgent:
    """`AskAgent` over the invoke path `invoke()` returns: the agent's result, or its
    error raised."""

    async def ask(
        capability: str, payload: dict[str, Any], trace_id: str, parent_span_id: str | None
    ) -> Any:
        digest = hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()
        request = InvokeRequest(
            capability=capability,
            payload=payload,
            request_id=f"intent-{digest[:40]}",
            suspend=False,
        )
        answer = await invoke().handle(request, TraceContext(trace_id, parent_span_id))
        body = orjson.loads(answer.body)
        if answer.status != 200:
            raise error_from_body(answer.status, body)
        return body.get("result")

    return ask
