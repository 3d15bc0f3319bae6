"""A `tools/call` inside a handshake-era MCP session (`Mcp-Session-Id`, 2025-11-25 and
before) on the fast path.

The MCP face keeps the sessions it opened (`faces/mcp_sessions.py`: the negotiated
version, the principal that opened them). A `POST /mcp` naming one of them, with that
version in `MCP-Protocol-Version` and the same principal's credentials, carrying a
`tools/call`, is answered here as the SDK's session transport and runner answer it:
the transport's request checks, the runner's validation and result sieve, the
dispatcher's error mapping, the JSON-RPC message dumped by the SDK's own model, sent as
the transport's event stream of one `message` event (its `json_response` is off; past
15 s the stream's head and a ping go out first, as sse-starlette's would). The session
is held in use meanwhile, as the transport holds it. Anything else is None before
anything is invoked: an unknown or ended session, another method, a notification,
another Accept or Content-Type, another principal, any other `Mcp-*` header. Another
principal's credentials on a session id thus reach the face, which answers them 404 as
it does an unknown session (`faces/mcp_sessions.py`): never a call made in that session.
"""

from __future__ import annotations

import asyncio
import functools
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import mcp_types as types
import orjson
import pydantic_core
import structlog
from mcp.server.streamable_http_manager import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp_types import methods as mcp_methods

from agent_reach.errors import ReachError
from agent_reach.faces.mcp_tools import call_tool
from agent_reach.server.fastfaces import mcp as fast_mcp
from agent_reach.server.fastfaces.mcp import accepts_json_and_events, audience, call_parts, refused
from agent_reach.server.fastfaces.mcp_result import shaped
from agent_reach.server.fastfaces.wire import EventStream, FaceAnswer, OnSlow, RawHeaders, Request

if TYPE_CHECKING:
    from agent_reach.faces.handler import FaceHandler
    from agent_reach.faces.mcp_server import McpFace
    from agent_reach.model.keys import Principal

log = structlog.get_logger("agent_reach.faces")

_VERSION_ONLY = frozenset({b"mcp-protocol-version"})
_JSON = "application/json"


async def session_call(
    handler: FaceHandler, face: McpFace, request: Request, body: bytes, on_slow: OnSlow
) -> FaceAnswer | None:
    """A `tools/call` in a live session the way the SDK's session transport answers it;
    None for anything else."""
    session_id = request.session_id
    if session_id is None or request.session_ids != 1 or face.manager is None:
        return None
    live = face.sessions.get(session_id)
    if live is None:
        return None
    call = _session_call(face, request, body, live.version)
    if call is None:
        return None
    try:
        principal = await handler.authenticate(
            request.authorization,
            request.peer,
            resource=audience(handler, request),
        )
    except ReachError as exc:  # `McpFace` refuses it before any session is looked up
        return refused(handler, request, exc, body)
    if principal != live.principal or face.sessions.get(session_id) is not live:
        return None
    stream = EventStream(_stream_headers(session_id), _ping)
    with face.sessions.using(session_id):
        timer = asyncio.get_running_loop().call_later(fast_mcp.SSE_AFTER_S, on_slow, stream)
        try:
            message = await _answered(handler, face, principal, call, live.version)
        finally:
            timer.cancel()
    return FaceAnswer(200, stream.headers, fast_mcp.sse_event(message), stream=True)


def _session_call(
    face: McpFace, request: Request, body: bytes, version: str
) -> tuple[Any, str, dict[str, Any] | None] | None:
    """(id, tool, arguments) of a body the session transport would dispatch as a valid
    `tools/call` of `version`, reading the headers as it does; None otherwise."""
    mcp = request.mcp
    if (
        mcp is None
        or request.mcp_other
        or mcp.keys() != _VERSION_ONLY
        or mcp[b"mcp-protocol-version"] != version
        or len(body) > DEFAULT_MAX_REQUEST_BODY_SIZE
        or not _json_content(request.content_type)
        or not accepts_json_and_events(request.accept)
        or face.server.cache_hints.get("tools/call") is not None
    ):
        return None
    try:
        call = pydantic_core.from_json(body)  # the transport's own parser
    except ValueError:
        return None
    parts = call_parts(call)
    if parts is None:
        return None
    call_id, name, arguments, meta = parts
    params = call["params"]
    envelope = orjson.dumps(meta) if "_meta" in params else None
    if not _valid(version, name, envelope):
        return None
    return call_id, name, arguments


@functools.lru_cache(maxsize=1024)
def _valid(version: str, name: str, meta: bytes | None) -> bool:
    """Whether the runner's validation of a `tools/call` of `name` with an arguments
    object and this `_meta` (None: none) passes. Nothing else of the call can fail it,
    and clients repeat all of it, so the verdict is kept."""
    params: dict[str, Any] = {"name": name, "arguments": {}}
    if meta is not None:
        params["_meta"] = orjson.loads(meta)
    try:
        mcp_methods.validate_client_request("tools/call", version, params)
        types.CallToolRequestParams.model_validate(params, by_name=False)
    except (KeyError, ValueError):  # pydantic's ValidationError is a ValueError
        return False
    return True


def _json_content(content_type: bytes | None) -> bool:
    """The transport's two Content-Type checks: it starts with application/json (any
    case), and a part before any `;` is exactly application/json."""
    if content_type is None:
        return False
    text = content_type.decode("latin-1")
    if not text.lower().startswith(_JSON):
        return False
    return any(part.strip() == _JSON for part in text.split(";")[0].split(","))


async def _answered(
    handler: FaceHandler,
    face: McpFace,
    principal: Principal,
    call: tuple[Any, str, dict[str, Any] | None],
    version: str,
) -> bytes:
    """The tool called, and the JSON-RPC message the session's dispatcher writes."""
    call_id, name, arguments = call
    try:
        result = await call_tool(handler, principal, name, arguments)
        # JSONRPCResponse's JSON dump: these keys in this order, its serializer for `result`
        return pydantic_core.to_json(
            {"jsonrpc": "2.0", "id": call_id, "result": shaped(face, result, version)}
        )
    except Exception as exc:
        error = handler_exception_to_error_data(exc)
        if error is None:  # the dispatcher's catch-all
            log.exception("mcp_tool_call_failed", tool=name)
            error = types.ErrorData(code=0, message=str(exc))
        message = types.JSONRPCError(jsonrpc="2.0", id=call_id, error=error)
        return message.model_dump_json(by_alias=True, exclude_unset=True).encode()


def _stream_headers(session_id: str) -> RawHeaders:
    """The session transport's event-stream head, as the app sends it."""
    return [
        (b"cache-control", b"no-cache, no-transform"),
        (b"content-type", b"text/event-stream"),
        (b"mcp-session-id", session_id.encode("latin-1")),
        (b"x-accel-buffering", b"no"),
    ]


def _ping() -> bytes:
    """sse-starlette's keep-alive comment."""
    return b": ping - %s\r\n\r\n" % str(datetime.now(UTC)).encode()
