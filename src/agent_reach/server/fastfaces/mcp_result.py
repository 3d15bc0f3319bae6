"""A `tools/call` result in the shape the MCP SDK's runner puts it on the wire
(`ServerRunner._serialize`): the per-version sieve and, on 2026-era requests, the
serverInfo stamp; the common shape built directly, pinned to the sieve by a test."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR
from mcp_types import methods as mcp_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

if TYPE_CHECKING:
    from agent_reach.faces.mcp_server import McpFace

_PLAIN_FIELDS = frozenset({"content", "structured_content", "is_error"})
_TEXT_FIELDS = frozenset({"text"})


def shaped(face: McpFace, result: types.CallToolResult, version: str) -> dict[str, Any]:
    """`ServerRunner._serialize` of a `tools/call` result: the per-version sieve and, on
    2026-era requests, the serverInfo stamp."""
    dumped = plain_result(result, version)
    if dumped is None:
        try:
            dumped = mcp_methods.serialize_server_result("tools/call", version, model_dump(result))
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


def plain_result(result: types.CallToolResult, version: str) -> dict[str, Any] | None:
    """The `version` sieve's output for the one shape `mcp_tools.call_tool` answers a
    delivered call with (text contents, a JSON object as structured content, not an
    error), built directly: the dump and the sieve are half the fast path's own cost.
    None for any other shape (the SDK shapes it); a test pins the two equal."""
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
    shaped: dict[str, Any] = {"content": content, "isError": False}
    if version in MODERN_PROTOCOL_VERSIONS:
        shaped["resultType"] = "complete"
    if structured is not None:
        shaped["structuredContent"] = structured
    return shaped


def model_dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)
