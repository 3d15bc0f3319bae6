"""What `/mcp`'s `tools/list` and `tools/call` answer, apart from the MCP sessions.

Both take a runtime and an authenticated principal and nothing of the ASGI stack, so a
fast path can answer a tool call without the SDK's transport. A principal is offered
exactly the tools `faces/catalog.offers` names (live, and invocable under its grants and
the access rules); a call on any other tool is the JSON-RPC error an unknown tool gets,
so what a client is shown and what it may call never disagree, and a refusal does not
tell a caller which tools exist for others.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
import orjson
import structlog
from mcp.shared.exceptions import MCPError

from agent_reach.errors import ReachError, ValidationFailed
from agent_reach.faces.catalog import LiveCapability, input_schema, live_capabilities, offers
from agent_reach.model.invocations import InvokeRequest
from agent_reach.model.keys import Principal
from agent_reach.observability.tracecontext import new_trace
from agent_reach.server.runtime import Runtime

log = structlog.get_logger("agent_reach.faces")

PAYLOAD_ONLY = {"type": "object", "properties": {"payload": {}}}


def list_tools(runtime: Runtime, principal: Principal) -> list[types.Tool]:
    """One tool per capability offered to `principal`, sorted by name."""
    return [_tool(c) for c in live_capabilities(runtime, principal)]


async def call_tool(
    runtime: Runtime, principal: Principal, name: str, arguments: dict[str, Any] | None
) -> types.CallToolResult:
    """Invoke the capability `name` for `principal`; `MCPError` (invalid params, "Unknown
    tool") for a tool it is not offered, a result with `isError` for a failed invocation."""
    if not offers(runtime, principal, name):
        log.info("mcp_tool_refused", tool=name, principal=principal.name)
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")
    arguments = arguments or {}
    declared = _declares_object(input_schema(runtime, name))
    payload = arguments if declared or "payload" not in arguments else arguments["payload"]
    try:
        request = InvokeRequest(capability=name, payload=payload)
    except ValueError as exc:
        return _failed(ValidationFailed(f"the tool call is not a valid invocation: {exc}"))
    answer = await runtime.invoke.handle(request, new_trace(), principal=principal)
    document = orjson.loads(answer.body)
    if answer.status >= 300 and answer.status != 202:
        error = document.get("error", {})
        error.pop("route", None)
        return types.CallToolResult(
            content=[types.TextContent(text=f"{error.get('code')}: {error.get('message')}")],
            structured_content={"error": error},
            is_error=True,
        )
    result = document.get("result") if answer.status == 200 else document
    text = (
        result["text"]
        if isinstance(result, dict) and isinstance(result.get("text"), str)
        else orjson.dumps(result).decode()
    )
    structured = result if isinstance(result, dict) else {"result": result}
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=structured
    )


def _declares_object(schema: dict[str, Any] | None) -> bool:
    """Whether the tool's inputSchema is the capability's own (its arguments are the payload)."""
    return schema is not None and schema.get("type") == "object"


def _tool(capability: LiveCapability) -> types.Tool:
    schema = capability.input_schema
    return types.Tool(
        name=capability.tag,
        description=capability.description or capability.tag,
        input_schema=schema if _declares_object(schema) else PAYLOAD_ONLY,
    )


def _failed(exc: ReachError) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=f"{exc.code}: {exc.message}")],
        structured_content=exc.to_body(),
        is_error=True,
    )
