"""The A2A face's sends on the fast path: `POST /a2a` (JSON-RPC, every method but the
streaming ones) and `POST /a2a/message:send`, answered with the face's own functions
(`a2a_rpc.answer_rpc`, `a2a_rest.send_answer`) as `faces/a2a_routes` answers them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from agent_reach.errors import ReachError
from agent_reach.faces.a2a_errors import error_of
from agent_reach.faces.a2a_rest import MEDIA_TYPE, send_answer
from agent_reach.faces.a2a_rpc import answer_rpc, error_answer
from agent_reach.observability.tracecontext import continue_trace
from agent_reach.server.fastfaces.wire import (
    FaceAnswer,
    RawHeaders,
    Request,
    given,
    json_answer,
)

if TYPE_CHECKING:
    from agent_reach.faces.handler import FaceHandler

_STREAMING = frozenset({"SendStreamingMessage", "message/stream"})


async def a2a_send(handler: FaceHandler, request: Request, body: bytes) -> FaceAnswer:
    """`POST /a2a/message:send` (the HTTP+JSON binding)."""
    status, answer = await send_answer(
        handler,
        given(body),
        request.a2a_version,
        request.authorization,
        request.peer,
        request.traceparent,
    )
    return FaceAnswer(status, _rest_headers(answer), answer)


def _rest_headers(body: bytes) -> RawHeaders:
    """Starlette's for the binding's `Response`: its length, then its type."""
    return [(b"content-length", b"%d" % len(body)), (b"content-type", MEDIA_TYPE.encode())]


async def a2a_rpc(handler: FaceHandler, request: Request, body: bytes) -> FaceAnswer | None:
    """`POST /a2a` as `faces/a2a_routes.rpc` answers it, but for streams (None)."""
    try:
        call = orjson.loads(body)
    except orjson.JSONDecodeError:
        call = None
    if isinstance(call, dict) and call.get("method") in _STREAMING:
        return None
    try:
        principal = await handler.authenticate(request.authorization, request.peer)
    except ReachError as exc:
        answer = error_answer(error_of(exc), None)
    else:
        trace = continue_trace(request.traceparent)
        answer = await answer_rpc(handler, body, principal, trace, request.a2a_version)
    if answer.stream is not None:  # the method was checked above; never reached
        raise RuntimeError("a streamed A2A answer on the fast path")
    return json_answer(answer.status, answer.body)
