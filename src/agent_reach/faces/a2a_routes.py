"""The A2A face's two routes: the agent card and the JSON-RPC endpoint."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response, StreamingResponse

from agent_reach.errors import ReachError
from agent_reach.faces.a2a_card import CARD_PATH, RPC_PATH, agent_card
from agent_reach.faces.a2a_rpc import A2AEndpoint, RpcError, rpc_error_of
from agent_reach.faces.a2a_stream import StreamedReply, sse_body
from agent_reach.faces.catalog import live_capabilities
from agent_reach.identity.certificates import peer_of
from agent_reach.model.keys import ANONYMOUS, Principal
from agent_reach.observability.tracecontext import continue_trace
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(tags=["a2a"])


@router.get(CARD_PATH)
async def card(request: Request) -> Response:
    """A v1.0 agent card; its skills are the live capabilities the caller may invoke."""
    runtime = runtime_of(request)
    security = runtime.security
    principal: Principal | None = ANONYMOUS
    if security.enabled:
        try:
            principal = await security.authenticate(
                request.headers.get("authorization"), peer_of(request.scope)
            )
        except ReachError:
            principal = None  # no valid key: the card without skills
    skills = [] if principal is None else live_capabilities(runtime, principal)
    base = runtime.settings.public_url or str(request.base_url)
    version = request.app.version
    return json_response(agent_card(base, version, skills, secured=security.enabled))


@router.post(RPC_PATH)
async def rpc(request: Request) -> Response:
    """One A2A JSON-RPC call (`SendMessage`, `SendStreamingMessage`, `GetTask`, and the
    v0.3 `message/send`, `message/stream`, `tasks/get`); a stream answers SSE."""
    runtime = runtime_of(request)
    try:
        try:
            principal = await runtime.security.authenticate(
                request.headers.get("authorization"), peer_of(request.scope)
            )
        except ReachError as exc:
            raise rpc_error_of(exc) from None
        call_id, result = await A2AEndpoint(runtime).call(
            await request.body(),
            principal,
            continue_trace(request.headers.get("traceparent")),
            request.headers.get("a2a-version"),
        )
    except RpcError as exc:
        error = {"code": exc.code, "message": exc.message}
        if exc.data is not None:
            error["data"] = exc.data
        return json_response({"jsonrpc": "2.0", "id": exc.call_id, "error": error}, exc.http_status)
    if isinstance(result, StreamedReply):
        return StreamingResponse(
            sse_body(call_id, result),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache"},
        )
    return json_response({"jsonrpc": "2.0", "id": call_id, "result": result})
