"""The A2A and MCP faces' common requests without the framework, for the edge server.

Measured (bench/faces.py): through FastAPI, and for `/mcp` through the MCP SDK's
streamable-HTTP layer, an A2A message send cost 2-3x `/v1/invoke`'s CPU per request
and an MCP tool call 4-6x, for the same delivery. The edge server hands three requests
here with the body it has read: `POST /a2a` (JSON-RPC, every method but the streaming
ones), `POST /a2a/message:send`, and `POST /mcp` carrying a 2026-07-28 `tools/call`
(the per-request envelope: no session). `answer_face` answers them with the faces' own
functions (`a2a_rpc.answer_rpc`, `a2a_rest.send_answer`, `mcp_tools.call_tool`) and the
SDK's own validation and result shaping, so the answer is the one the full stack gives,
byte for byte; or returns None before anything is invoked, and the request goes to the
ASGI app as it is. It returns None for whatever it does not answer exactly as the full
stack would: a foreign Origin, oversized headers, streaming methods, an MCP request of
a handshake-era session or other than a `tools/call`, a header or envelope the SDK
would refuse, `Mcp-Param-*` headers or a tool schema declaring them, another Accept or
Content-Type.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mcp_types as types
import orjson
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http_manager import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    X_MCP_HEADER_KEY,
    InboundModernRoute,
    classify_inbound_request,
)
from mcp_types import INTERNAL_ERROR
from mcp_types import methods as mcp_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from agent_reach.errors import ReachError
from agent_reach.faces.a2a_errors import error_of
from agent_reach.faces.a2a_rest import send_answer
from agent_reach.faces.a2a_rpc import answer_rpc, error_answer
from agent_reach.faces.catalog import input_schema
from agent_reach.faces.mcp_auth import refusal, request_id_of, resource_audience
from agent_reach.faces.mcp_tools import call_tool
from agent_reach.identity.certificates import PeerCertificate
from agent_reach.model.keys import Principal
from agent_reach.observability.tracecontext import continue_trace
from agent_reach.server.limits import check_headers

if TYPE_CHECKING:
    from agent_reach.faces.mcp_server import McpFace
    from agent_reach.server.runtime import Runtime

Headers = list[tuple[bytes, bytes]]
RawHeaders = list[tuple[bytes, bytes]]
A2A_RPC, A2A_SEND, MCP = b"/a2a", b"/a2a/message:send", b"/mcp"
_STREAMING = frozenset({"SendStreamingMessage", "message/stream"})
_JSON = b"application/json"
# The SDK's modern entry commits to an event stream when a handler runs this long
# (`_streamable_http_modern._SSE_PING_INTERVAL`), with a ping comment as often.
SSE_AFTER_S = 15.0
SSE_HEADERS: RawHeaders = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
SSE_PING = b": ping\r\n\r\n"
_ROUTING = (b"mcp-protocol-version", b"mcp-method", b"mcp-name")
_ROUTING_NAMES = tuple(name.decode() for name in _ROUTING)
_CALL_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_PARAM_KEYS = frozenset({"name", "arguments", "_meta"})
_PLAIN_FIELDS = frozenset({"content", "structured_content", "is_error"})
_TEXT_FIELDS = frozenset({"text"})


@dataclass(frozen=True, slots=True)
class FaceAnswer:
    """A whole answer: status, headers as the ASGI app would send them (the edge adds
    `x-reach-node` and framing), body."""

    status: int
    headers: RawHeaders
    body: bytes


# Called when an MCP call has run `SSE_AFTER_S`: the edge commits to an event stream
# (`edge_faces`), and sends the answer as its one event once it is made.
OnSlow = Callable[[], None]


@dataclass(slots=True)
class Request:
    """What the faces read of a request's head: the first value of each header (as
    Starlette's `headers.get`), the last Host and Origin."""

    headers: Headers
    peer: PeerCertificate | None
    tls: bool
    local: tuple[str, int]
    host: bytes | None = None
    origin: bytes | None = None
    authorization: str | None = None
    authorizations: int = 0
    content_type: bytes | None = None
    accept: bytes | None = None
    traceparent: str | None = None
    a2a_version: str | None = None
    mcp: dict[bytes, str] | None = None  # routing headers; None when one is repeated
    mcp_other: bool = False  # Mcp-Session-Id or an Mcp-Param-* header

    def scope(self) -> dict[str, Any]:
        """The little of an ASGI scope `faces/mcp_auth` reads."""
        return {
            "scheme": "https" if self.tls else "http",
            "headers": self.headers,
            "server": self.local,
        }


def read_head(
    headers: Headers, peer: PeerCertificate | None, tls: bool, local: tuple[str, int]
) -> Request:
    """One pass over the head."""
    request = Request(headers, peer, tls, local)
    mcp: dict[bytes, str] | None = {}
    for name, value in headers:
        if name == b"authorization":
            request.authorizations += 1
            if request.authorization is None:
                request.authorization = value.decode("latin-1")
        elif name == b"host":  # the last, as `server/app._check_origin` reads them
            request.host = value
        elif name == b"origin":
            request.origin = value
        elif name == b"content-type":
            request.content_type = request.content_type or value
        elif name == b"accept":
            request.accept = value if request.accept is None else request.accept
        elif name == b"traceparent":
            request.traceparent = request.traceparent or value.decode("latin-1")
        elif name == b"a2a-version":
            if request.a2a_version is None:
                request.a2a_version = value.decode("latin-1")
        elif name.startswith(b"mcp-"):
            if name in _ROUTING:
                if mcp is not None and name in mcp:
                    mcp = None
                elif mcp is not None:
                    mcp[name] = value.decode("latin-1")
            else:
                request.mcp_other = True
    request.mcp = mcp
    return request


@dataclass(frozen=True, slots=True)
class FaceRoutes:
    """The faces of one running coordinator, as the edge server calls them."""

    runtime: Runtime
    mcp: McpFace

    async def answer(
        self,
        path: bytes,
        headers: Headers,
        body: bytes,
        peer: PeerCertificate | None,
        tls: bool,
        local: tuple[str, int],
        on_slow: OnSlow,
    ) -> FaceAnswer | None:
        """`answer_face` for a request's head and body."""
        request = read_head(headers, peer, tls, local)
        return await answer_face(self.runtime, self.mcp, path, request, body, on_slow)


async def answer_face(
    runtime: Runtime, mcp: McpFace, path: bytes, request: Request, body: bytes, on_slow: OnSlow
) -> FaceAnswer | None:
    """The answer to a request for `path` (one of the three), or None: the full stack's."""
    try:
        check_headers(len(request.headers), sum(len(n) + len(v) for n, v in request.headers))
        runtime.security.origins.check(path.decode(), request.host, request.origin)
    except ReachError:
        return None
    if request.authorizations > 1:
        return None
    if path == MCP:
        return await _mcp_call(runtime, mcp, request, body, on_slow)
    if path == A2A_SEND:
        status, answer = await send_answer(
            runtime,
            _given(body),
            request.a2a_version,
            request.authorization,
            request.peer,
            request.traceparent,
        )
        return _json(status, answer)
    return await _a2a_rpc(runtime, request, body)


async def _a2a_rpc(runtime: Runtime, request: Request, body: bytes) -> FaceAnswer | None:
    """`POST /a2a` as `faces/a2a_routes.rpc` answers it, but for streams."""
    try:
        call = orjson.loads(body)
    except orjson.JSONDecodeError:
        call = None
    if isinstance(call, dict) and call.get("method") in _STREAMING:
        return None
    try:
        principal = await runtime.security.authenticate(request.authorization, request.peer)
    except ReachError as exc:
        answer = error_answer(error_of(exc), None)
    else:
        trace = continue_trace(request.traceparent)
        answer = await answer_rpc(runtime, body, principal, trace, request.a2a_version)
    if answer.stream is not None:  # the method was checked above; never reached
        raise RuntimeError("a streamed A2A answer on the fast path")
    return _json(answer.status, answer.body)


async def _mcp_call(
    runtime: Runtime, face: McpFace, request: Request, body: bytes, on_slow: OnSlow
) -> FaceAnswer | None:
    """A 2026-07-28 `tools/call` the way `faces/mcp_server.McpFace` and the SDK's
    modern entry answer it; None for anything else."""
    call = _modern_call(face, request, body)
    if call is None:
        return None
    call_id, name, arguments, version = call
    scope = request.scope()
    try:
        principal = await runtime.security.authenticate(
            request.authorization, request.peer, resource=resource_audience(runtime.settings, scope)
        )
    except ReachError as exc:
        refused = refusal(runtime.settings, scope, exc, request_id_of(body))
        return FaceAnswer(refused.status_code, refused.raw_headers, bytes(refused.body))
    if not _callable(runtime, name, arguments):
        return None
    timer = asyncio.get_running_loop().call_later(SSE_AFTER_S, on_slow)
    try:
        return await _called(runtime, face, principal, (name, arguments), call_id, version)
    finally:
        timer.cancel()


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
        or mcp.get(b"mcp-protocol-version") not in MODERN_PROTOCOL_VERSIONS
        or len(body) > DEFAULT_MAX_REQUEST_BODY_SIZE
        or not _is_json_post(request.content_type)
        or not _accepts_json_and_events(request.accept)
        or face.server.cache_hints.get("tools/call") is not None
    ):
        return None
    try:
        call = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(call, dict) or call.keys() != _CALL_KEYS:
        return None
    call_id, params = call["id"], call["params"]
    if (
        call["jsonrpc"] != "2.0"
        or call["method"] != "tools/call"
        or isinstance(call_id, bool)
        or not isinstance(call_id, str | int)
        or not isinstance(params, dict)
        or not params.keys() <= _PARAM_KEYS
    ):
        return None
    name, arguments, meta = params.get("name"), params.get("arguments"), params.get("_meta")
    if (
        not isinstance(name, str)
        or not (arguments is None or isinstance(arguments, dict))
        or not isinstance(meta, dict)
    ):
        return None  # the SDK's own answer: INVALID_PARAMS, or fields it reads otherwise
    routing = (mcp.get(b"mcp-protocol-version"), mcp.get(b"mcp-method"), mcp.get(b"mcp-name"))
    version = _envelope_version(orjson.dumps(meta), *routing, name)
    return None if version is None else (call_id, name, arguments, version)


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


def _callable(runtime: Runtime, name: str, arguments: dict[str, Any] | None) -> bool:
    """Whether the SDK's `Mcp-Param-*` check (against the tool's listed schema; no such
    header was sent) passes for sure: no arguments, or a schema without annotations. A
    tool the caller is not offered is refused by `call_tool`, as on the full stack."""
    if not arguments:
        return True
    schema = input_schema(runtime, name)
    return schema is None or X_MCP_HEADER_KEY.encode() not in orjson.dumps(schema)


async def _called(
    runtime: Runtime,
    face: McpFace,
    principal: Principal,
    call: tuple[str, dict[str, Any] | None],
    call_id: Any,
    version: str,
) -> FaceAnswer:
    """The tool called, and its JSON-RPC answer as the SDK's modern entry writes it."""
    status, message = 200, {"jsonrpc": "2.0", "id": call_id}
    try:
        result = await call_tool(runtime, principal, *call)
        # JSONRPCResponse's dump: these keys in this order (exclude_none keeps inner None)
        message["result"] = _shaped(face, result, version)
    except Exception as exc:
        error = types.JSONRPCError(jsonrpc="2.0", id=call_id, error=modern_error_data(exc))
        status = ERROR_CODE_HTTP_STATUS.get(error.error.code, 200)
        message = _dumped(error)
    body = json.dumps(message, separators=(",", ":")).encode()
    return FaceAnswer(status, _json_headers(body), body)


def _shaped(face: McpFace, result: types.CallToolResult, version: str) -> dict[str, Any]:
    """`ServerRunner._serialize` of a `tools/call` result: the per-version sieve and, on
    2026-era requests, the serverInfo stamp."""
    dumped = plain_result(result)
    if dumped is None:
        try:
            dumped = mcp_methods.serialize_server_result("tools/call", version, _dumped(result))
        except ValidationError:
            raise MCPError(INTERNAL_ERROR, "Handler returned an invalid result") from None
    if version in MODERN_PROTOCOL_VERSIONS:
        if dumped.get("resultType") is None:
            dumped["resultType"] = "complete"
        meta = dumped.get("_meta")
        stamp = _server_info(face.server)
        if meta is None:
            dumped["_meta"] = {types.SERVER_INFO_META_KEY: stamp}
        elif isinstance(meta, dict) and meta.get(types.SERVER_INFO_META_KEY) is None:
            dumped["_meta"] = {**meta, types.SERVER_INFO_META_KEY: stamp}
    return dumped


@functools.lru_cache(maxsize=4)
def _server_info(server: Any) -> dict[str, Any]:
    """The serverInfo stamp, made once: the SDK deep-copies it for every response, so
    that none aliases its state; here it is only serialized."""
    stamp: dict[str, Any] = server.server_info_stamp
    return stamp


def plain_result(result: types.CallToolResult) -> dict[str, Any] | None:
    """The sieve's output for the one shape `mcp_tools.call_tool` answers a delivered call
    with (text contents, a JSON object as structured content, not an error), built
    directly: the dump and the sieve are half the fast path's own cost. None for any
    other shape (the SDK shapes it); a test pins the two equal."""
    if not result.model_fields_set <= _PLAIN_FIELDS or result.is_error is not False:
        return None
    structured = result.structured_content
    if structured is not None and type(structured) is not dict:
        return None
    content = []
    for item in result.content:
        if type(item) is not types.TextContent or item.model_fields_set != _TEXT_FIELDS:
            return None
        content.append({"text": item.text, "type": "text"})
    shaped: dict[str, Any] = {"content": content, "isError": False, "resultType": "complete"}
    if structured is not None:
        shaped["structuredContent"] = structured
    return shaped


def _dumped(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def _is_json_post(content_type: bytes | None) -> bool:
    """The SDK's POST check: a Content-Type that starts with application/json."""
    return content_type is not None and content_type.lower().startswith(_JSON)


def _accepts_json_and_events(accept: bytes | None) -> bool:
    """`streamable_http.check_accept_headers` granting both JSON and an event stream."""
    if accept is None:
        return False
    kinds = {part.split(b";")[0].strip().lower() for part in accept.split(b",")}
    if b"*/*" in kinds:
        return True
    has_json = _JSON in kinds or b"application/*" in kinds
    return has_json and (b"text/event-stream" in kinds or b"text/*" in kinds)


def sse_event(body: bytes) -> bytes:
    """A JSON-RPC message as the SDK's one SSE `message` event."""
    return b"event: message\r\ndata: %s\r\n\r\n" % body


def _json(status: int, body: bytes) -> FaceAnswer:
    return FaceAnswer(status, _json_headers(body), body)


def _json_headers(body: bytes) -> RawHeaders:
    """Starlette's for a JSON `Response`: its length, then its type."""
    return [(b"content-length", b"%d" % len(body)), (b"content-type", _JSON)]


def _given(body: bytes) -> Callable[[], Awaitable[bytes]]:
    async def read() -> bytes:
        return body

    return read
