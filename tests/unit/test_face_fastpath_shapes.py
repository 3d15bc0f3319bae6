"""What the faces' fast path reproduces of the MCP SDK, pinned to the SDK itself: the
result shape it builds directly, how it reads Accept, and the 15 s event-stream window."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest
from mcp.server import _streamable_http_modern
from mcp.server.streamable_http import check_accept_headers
from mcp_types import methods
from starlette.requests import Request

from agent_reach.server import face_fastpath
from agent_reach.server.face_fastpath import plain_result

STRUCTURED: list[Any] = [
    None,
    {},
    {"echo": "pong", "ok": True},
    {"a": None, "b": [None, 1.5, -0.0, 1e16, 2**70], "c": {"d": 'é✓\u0000\n"/'}},
    {"nested": {"deep": [{"x": [[]]}]}, "n": 3},
]


def _sdk(result: types.CallToolResult) -> dict[str, Any]:
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return methods.serialize_server_result("tools/call", "2026-07-28", dumped)


@pytest.mark.parametrize("structured", STRUCTURED)
@pytest.mark.parametrize("texts", [[], ["3 left"], ["a", '{"b": 1}', "ünïcode"]])
def test_the_plain_shape_is_the_sdk_sieve_byte_for_byte(structured: Any, texts: list[str]) -> None:
    result = types.CallToolResult(
        content=[types.TextContent(text=t) for t in texts], structured_content=structured
    )
    shaped = plain_result(result)
    assert shaped is not None
    assert json.dumps(shaped, separators=(",", ":")) == json.dumps(
        _sdk(result), separators=(",", ":")
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
    assert plain_result(result) is None


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
    assert face_fastpath._accepts_json_and_events(accept.encode()) == (has_json and has_sse)


def test_the_event_stream_window_is_the_sdks() -> None:
    assert face_fastpath.SSE_AFTER_S == _streamable_http_modern._SSE_PING_INTERVAL
