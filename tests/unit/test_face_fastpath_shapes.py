"""What the faces' fast path reproduces of the MCP SDK, pinned to the SDK itself: the
result shape it builds directly (for every protocol version), how it reads Accept and,
in a session, Content-Type, and the 15 s event-stream window."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pydantic_core
import pytest
from mcp.server import _streamable_http_modern
from mcp.server.streamable_http import StreamableHTTPServerTransport, check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp_types import methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request

from agent_reach.server.fastfaces import mcp as fast_mcp
from agent_reach.server.fastfaces import mcp_session
from agent_reach.server.fastfaces.mcp_result import plain_result

STRUCTURED: list[Any] = [
    None,
    {},
    {"echo": "pong", "ok": True},
    {"a": None, "b": [None, 1.5, -0.0, 1e16, 2**70], "c": {"d": 'é✓\u0000\n"/'}},
    {"nested": {"deep": [{"x": [[]]}]}, "n": 3},
]


VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)


def _sdk(result: types.CallToolResult, version: str) -> dict[str, Any]:
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return methods.serialize_server_result("tools/call", version, dumped)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("structured", STRUCTURED)
@pytest.mark.parametrize("texts", [[], ["3 left"], ["a", '{"b": 1}', "ünïcode"]])
def test_the_plain_shape_is_the_sdk_sieve_byte_for_byte(
    structured: Any, texts: list[str], version: str
) -> None:
    result = types.CallToolResult(
        content=[types.TextContent(text=t) for t in texts], structured_content=structured
    )
    shaped = plain_result(result, version)
    assert shaped is not None
    assert json.dumps(shaped, separators=(",", ":")) == json.dumps(
        _sdk(result, version), separators=(",", ":")
    )


@pytest.mark.parametrize(
    "result",
    [
        types.CallToolResult(content=[types.TextContent(text="x")], is_error=True),
        types.CallToolResult(
            content=[types.TextContent(text="x", annotations=types.Annotations(priority=0.5))]
        ),
        types.CallToolResult(content=[types.ImageContent(data="AA==", mime_type="image/png")]),
        types.CallToolResult(content=[], meta={"k": "v"}),
    ],
    ids=["error", "annotated", "image", "meta"],
)
def test_any_other_shape_is_left_to_the_sdk(result: types.CallToolResult) -> None:
    for version in VERSIONS:
        assert plain_result(result, version) is None


@pytest.mark.parametrize(
    "accept",
    [
        "application/json, text/event-stream",
        "text/event-stream;q=0.9 , Application/JSON",
        "*/*",
        "application/*, text/*",
        "application/json",
        "text/event-stream",
        "application/jsonx, text/event-streams",
        "",
        " , ;",
    ],
)
def test_accept_is_read_as_the_sdk_reads_it(accept: str) -> None:
    scope = {"type": "http", "headers": [(b"accept", accept.encode())]}
    has_json, has_sse = check_accept_headers(Request(scope))
    assert fast_mcp.accepts_json_and_events(accept.encode()) == (has_json and has_sse)


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/json, text/plain",
        " application/json",
        "application/jsonx",
        "application/json-patch+json",
        "text/plain, application/json",
        "",
    ],
)
async def test_a_session_call_reads_content_type_as_the_sdks_transport(
    content_type: str,
) -> None:
    """The transport's two checks: the security middleware's, then its own."""
    scope = {
        "type": "http",
        "method": "POST",
        "headers": [(b"content-type", content_type.encode())],
    }
    request = Request(scope)
    passes = await TransportSecurityMiddleware().validate_request(request, is_post=True) is None
    transport = StreamableHTTPServerTransport(mcp_session_id="s")
    sdk = passes and transport._check_content_type(request)
    assert mcp_session._json_content(content_type.encode() or None) == sdk


def test_the_event_stream_window_is_the_sdks() -> None:
    assert fast_mcp.SSE_AFTER_S == _streamable_http_modern._SSE_PING_INTERVAL


@pytest.mark.parametrize("call_id", [7, "id-é", 2**53 + 1])
@pytest.mark.parametrize("structured", STRUCTURED)
def test_a_session_answer_is_the_sdks_message_dump(structured: Any, call_id: Any) -> None:
    """The session transport's event data: `JSONRPCResponse.model_dump_json`."""
    result = types.CallToolResult(
        content=[types.TextContent(text="ünï")], structured_content=structured
    )
    shaped = plain_result(result, "2025-11-25")
    assert shaped is not None
    sdk = types.JSONRPCResponse(jsonrpc="2.0", id=call_id, result=shaped)
    ours = pydantic_core.to_json({"jsonrpc": "2.0", "id": call_id, "result": shaped})
    assert ours == sdk.model_dump_json(by_alias=True, exclude_unset=True).encode()
