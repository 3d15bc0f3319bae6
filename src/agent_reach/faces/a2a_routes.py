"""The A2A face's routes: the agent card (public), the JSON-RPC endpoint, and the
HTTP+JSON binding's routes (`a2a_rest.py`)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response, StreamingResponse

from agent_reach.errors import ReachError
from agent_reach.faces.a2a_card import CARD_PATHS, RPC_PATH, agent_card
from agent_reach.faces.a2a_errors import error_of
from agent_reach.faces.a2a_rest import router as rest_router
from agent_reach.faces.a2a_rpc import answer_rpc, error_answer
from agent_reach.faces.a2a_stream import sse_body
from agent_reach.faces.handler import handler_of
from agent_reach.identity.certificates import peer_of
from agent_reach.model.keys import ANONYMOUS, Principal
from agent_reach.observability.tracecontext import continue_trace
from agent_reach.wire.json_answers import json_response

router = APIRouter(tags=["a2a"])


async def card(request: Request) -> Response:
    """A v1.0 agent card, readable without a key; its skills are the live capabilities the
    caller may invoke (none without a valid key when keys are on)."""
    handler = handler_of(request)
    principal: Principal | None = ANONYMOUS
    if handler.secured:
        try:
            principal = await handler.authenticate(
                request.headers.get("authorization"), peer_of(request.scope)
            )
        except ReachError:
            principal = None  # no valid key: the card without skills
    skills = [] if principal is None else handler.catalog.live_capabilities(principal)
    base = handler.settings.public_url or str(request.base_url)
    version = request.app.version
    return json_response(agent_card(base, version, skills, secured=handler.secured))


for _path in (*CARD_PATHS, RPC_PATH):
    router.add_api_route(_path, card, methods=["GET"])


@router.post(RPC_PATH)
async def rpc(request: Request) -> Response:
    """One A2A JSON-RPC call (`a2a_rpc.py`); a stream answers SSE."""
    handler = handler_of(request)
    try:
        principal = await handler.authenticate(
            request.headers.get("authorization"), peer_of(request.scope)
        )
    except ReachError as exc:
        answer = error_answer(error_of(exc), None)
    else:
        answer = await answer_rpc(
            handler,
            await request.body(),
            principal,
            continue_trace(request.headers.get("traceparent")),
            request.headers.get("a2a-version"),
        )
    if answer.stream is not None:
        return StreamingResponse(
            sse_body(answer.call_id, answer.stream),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache"},
        )
    return Response(answer.body, answer.status, media_type="application/json")


router.include_router(rest_router)
