"""MCP `tools/call` on the fast path: the 2026-07-28 per-request envelope (no session),
and what a call in a handshake-era session (`mcp_session`) shares with it: the
SDK's reading of Accept and the body, the audience of its credentials, its refusals.

A call is answered the way `faces/mcp_server.McpFace` and the SDK's modern entry answer
it (the SDK's envelope ladder, request validation and result shaping); anything else is
None before anything is invoked: a header or envelope the SDK would refuse,
`Mcp-Param-*` headers or a tool schema declaring them, another Accept or Content-Type.
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import TYPE_CHECKING, Any

import mcp_types as types
import orjson
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http_manager import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    X_MCP_HEADER_KEY,
    InboundModernRoute,
    classify_inbound_request,
)
from mcp_types import methods as mcp_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agent_reach.errors import ReachError
from agent_reach.faces.mcp_auth import refusal, request_id_of, resource_audience
from agent_reach.faces.mcp_tools import call_tool
from agent_reach.model.keys import Principal
from agent_reach.server.fastfaces.mcp_result import model_dump, shaped
from agent_reach.server.fastfaces.wire import (
    JSON,
    ROUTING,
    EventStream,
    FaceAnswer,
    OnSlow,
    RawHeaders,
    Request,
    json_headers,
)

if TYPE_CHECKING:
    from agent_reach.faces.handler import FaceHandler
    from agent_reach.faces.mcp_server import McpFace

# The SDK's modern entry commits to an event stream when a handler runs this long
# (`_streamable_http_modern._SSE_PING_INTERVAL`), with a ping comment as often.
SSE_AFTER_S = 15.0
SSE_HEADERS: RawHeaders = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
SSE_PING = b": ping\r\n\r\n"
MODERN_STREAM = EventStream(SSE_HEADERS, lambda: SSE_PING)
_ROUTING_NAMES = tuple(name.decode() for name in ROUTING)
CALL_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
PARAM_KEYS = frozenset({"name", "arguments", "_meta"})


async def modern_call(
    handler: FaceHandler, face: McpFace, request: Request, body: bytes, on_slow: OnSlow
) -> FaceAnswer | None:
    """A 2026-07-28 `tools/call` the way `faces/mcp_server.McpFace` and the SDK's
    modern entry answer it; None for anything else."""
    call = _modern_call(face, request, body)
    if call is None:
        return None
    call_id, name, arguments, version = call
    try:
        principal = await handler.authenticate(
            request.authorization, request.peer, resource=audience(handler, request)
        )
    except ReachError as exc:
        return refused(handler, request, exc, body)
    if not _callable(handler, name, arguments):
        return None
    timer = asyncio.get_running_loop().call_later(SSE_AFTER_S, on_slow, MODERN_STREAM)
    try:
        return await _called(handler, face, principal, (name, arguments), call_id, version)
    finally:
        timer.cancel()


_Audience = tuple[str | None, bool, bytes | None, tuple[str, int]]
_audiences: dict[_Audience, str | None] = {}


def audience(handler: FaceHandler, request: Request) -> str | None:
    """`mcp_auth.resource_audience` of the request, kept per public URL, scheme, Host
    and local address (all it reads): reading the Host is a tenth of a call's own cost."""
    if request.hosts > 1:  # it reads the first Host; the head keeps the last
        return resource_audience(handler.settings, request.scope())
    key = (handler.settings.public_url, request.tls, request.host, request.local)
    if key in _audiences:
        return _audiences[key]
    if len(_audiences) >= 256:
        _audiences.clear()
    value = _audiences[key] = resource_audience(handler.settings, request.scope())
    return value


def refused(handler: FaceHandler, request: Request, error: ReachError, body: bytes) -> FaceAnswer:
    """`McpFace`'s refusal of a request whose credentials do not authenticate."""
    answer = refusal(handler.settings, request.scope(), error, request_id_of(body))
    return FaceAnswer(answer.status_code, answer.raw_headers, bytes(answer.body))


def _modern_call(
    face: McpFace, request: Request, body: bytes
) -> tuple[Any, str, dict[str, Any] | None, str] | None:
    """(id, tool, arguments, protocol version) of a body the SDK's modern entry would
    dispatch as a valid `tools/call`, reading the headers as it does; None otherwise."""
    mcp = request.mcp
    if (
        mcp is None
        or face.manager is None  # not serving sessions (yet, or any more): its 503
        or request.mcp_other
        or request.session_ids
        or mcp.get(b"mcp-protocol-version") not in MODERN_PROTOCOL_VERSIONS
        or len(body) > DEFAULT_MAX_REQUEST_BODY_SIZE
        or not _is_json_post(request.content_type)
        or not accepts_json_and_events(request.accept)
        or face.server.cache_hints.get("tools/call") is not None
    ):
        return None
    try:
        call = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    parts = call_parts(call)
    if parts is None or not isinstance(parts[3], dict):
        return None  # the SDK's own answer: fields it reads otherwise
    call_id, name, arguments, meta = parts
    routing = (mcp.get(b"mcp-protocol-version"), mcp.get(b"mcp-method"), mcp.get(b"mcp-name"))
    version = _envelope_version(orjson.dumps(meta), *routing, name)
    return None if version is None else (call_id, name, arguments, version)


def call_parts(call: Any) -> tuple[Any, str, dict[str, Any] | None, Any] | None:
    """(id, tool, arguments, `_meta` or None) of a JSON-RPC `tools/call` request with an
    id, a name, an arguments object or none and nothing else; None for anything else."""
    if not isinstance(call, dict) or call.keys() != CALL_KEYS:
        return None
    call_id, params = call["id"], call["params"]
    if (
        call["jsonrpc"] != "2.0"
        or call["method"] != "tools/call"
        or isinstance(call_id, bool)
        or not isinstance(call_id, str | int)
        or not isinstance(params, dict)
        or not params.keys() <= PARAM_KEYS
    ):
        return None
    name, arguments = params.get("name"), params.get("arguments")
    if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
        return None  # the SDK's own answer: INVALID_PARAMS
    return call_id, name, arguments, params.get("_meta")


@functools.lru_cache(maxsize=1024)
def _envelope_version(
    meta: bytes, version: str | None, method: str | None, tool_header: str | None, tool: str
) -> str | None:
    """The protocol version of a `tools/call` of `tool` whose params are a name, an
    arguments object and this `_meta`, under these routing headers, when the SDK's ladder
    (`classify_inbound_request`) and its validation of the request pass it; else None.
    Nothing else of the request can fail them, and clients repeat all of it, so the
    verdict is kept."""
    envelope = orjson.loads(meta)
    call = {"method": "tools/call", "params": {"name": tool, "_meta": envelope}}
    headers = {
        k: v
        for k, v in zip(_ROUTING_NAMES, (version, method, tool_header), strict=True)
        if v is not None
    }
    route = classify_inbound_request(call, headers=headers)
    if not isinstance(route, InboundModernRoute):
        return None
    params = {"name": tool, "arguments": {}, "_meta": envelope}
    try:
        mcp_methods.validate_client_request("tools/call", route.protocol_version, params)
    except (KeyError, ValueError):  # pydantic's ValidationError is a ValueError
        return None
    return route.protocol_version


def _callable(handler: FaceHandler, name: str, arguments: dict[str, Any] | None) -> bool:
    """Whether the SDK's `Mcp-Param-*` check (against the tool's listed schema; no such
    header was sent) passes for sure: no arguments, or a schema without annotations. A
    tool the caller is not offered is refused by `call_tool`, as on the full stack."""
    if not arguments:
        return True
    schema = handler.catalog.input_schema(name)
    return schema is None or X_MCP_HEADER_KEY.encode() not in orjson.dumps(schema)


async def _called(
    handler: FaceHandler,
    face: McpFace,
    principal: Principal,
    call: tuple[str, dict[str, Any] | None],
    call_id: Any,
    version: str,
) -> FaceAnswer:
    """The tool called, and its JSON-RPC answer as the SDK's modern entry writes it."""
    status, message = 200, {"jsonrpc": "2.0", "id": call_id}
    try:
        result = await call_tool(handler, principal, *call)
        # JSONRPCResponse's dump: these keys in this order (exclude_none keeps inner None)
        message["result"] = shaped(face, result, version)
    except Exception as exc:
        error = types.JSONRPCError(jsonrpc="2.0", id=call_id, error=modern_error_data(exc))
        status = ERROR_CODE_HTTP_STATUS.get(error.error.code, 200)
        message = model_dump(error)
    body = json.dumps(message, separators=(",", ":")).encode()
    return FaceAnswer(status, json_headers(body), body)


def _is_json_post(content_type: bytes | None) -> bool:
    """The SDK's POST check: a Content-Type that starts with application/json."""
    return content_type is not None and content_type.lower().startswith(JSON)


def accepts_json_and_events(accept: bytes | None) -> bool:
    """`streamable_http.check_accept_headers` granting both JSON and an event stream."""
    if accept is None:
        return False
    kinds = {part.split(b";")[0].strip().lower() for part in accept.split(b",")}
    if b"*/*" in kinds:
        return True
    has_json = JSON in kinds or b"application/*" in kinds
    return has_json and (b"text/event-stream" in kinds or b"text/*" in kinds)


def sse_event(body: bytes) -> bytes:
    """A JSON-RPC message as the SDK's one SSE `message` event."""
    return b"event: message\r\ndata: %s\r\n\r\n" % body
