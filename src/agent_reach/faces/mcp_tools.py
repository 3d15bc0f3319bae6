"""What `/mcp`'s `tools/list` and `tools/call` answer, apart from the MCP sessions.

Both take the face handler and an authenticated principal and nothing of the ASGI stack, so a
fast path can answer a tool call without the SDK's transport. A principal is offered
exactly the tools `Catalog.offers` names (live, and invocable under its grants and
the access rules); a call on any other tool is the JSON-RPC error an unknown tool gets,
so what a client is shown and what it may call never disagree, and a refusal does not
tell a caller which tools exist for others.

One more tool is offered to a principal with at least FIND_TOOLS_FROM tools: `find_tools`
(semantic tool search), a query in and the k tools of its own list that fit it best out,
with their input schemas, so a client facing hundreds of federated tools puts only the
few it needs before its model. Like any tool, it is callable exactly when listed. A
capability registered under that very name is never offered here: the name is the search's.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
import orjson
import structlog
from mcp.shared.exceptions import MCPError

from agent_reach.errors import ReachError, ValidationFailed
from agent_reach.faces.catalog import LiveCapability
from agent_reach.faces.handler import FaceHandler
from agent_reach.model.invocations import MAX_TOP_K, InvokeRequest
from agent_reach.model.keys import Principal
from agent_reach.observability.tracecontext import new_trace

log = structlog.get_logger("agent_reach.faces")

PAYLOAD_ONLY = {"type": "object", "properties": {"payload": {}}}
FIND_TOOLS = "find_tools"
FIND_TOOLS_TOP_K = 5  # a model picks among five well, and the right tool is usually there
# Below this many tools the list itself is short enough for a model to read: no search.
FIND_TOOLS_FROM = 10
FIND_TOOLS_TOOL = types.Tool(
    name=FIND_TOOLS,
    description=(
        "Search this server's tools by meaning: give what the user wants in their own words "
        "(any language) and get the few tools that fit it best, each with its input schema, "
        "best first. Use it when the tool list is too long to read."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": 4000,
                "description": "what the user wants, e.g. 'track my parcel SF123'",
            },
            "top_k": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TOP_K,
                "default": FIND_TOOLS_TOP_K,
                "description": "how many tools to return",
            },
        },
        "required": ["query"],
    },
)


def list_tools(handler: FaceHandler, principal: Principal) -> list[types.Tool]:
    """One tool per capability offered to `principal`, sorted by name; `find_tools` first
    when there are at least FIND_TOOLS_FROM of them."""
    live = handler.catalog.live_capabilities(principal)
    tools = [_tool(c) for c in live if c.tag != FIND_TOOLS]
    return [FIND_TOOLS_TOOL, *tools] if len(tools) >= FIND_TOOLS_FROM else tools


def offers_search(handler: FaceHandler, principal: Principal) -> bool:
    """Whether `find_tools` is listed to (and callable by) `principal`."""
    catalog = handler.catalog
    found = 0
    for tag in catalog.tags():
        if tag != FIND_TOOLS and catalog.offers(principal, tag):
            found += 1
            if found >= FIND_TOOLS_FROM:
                return True
    return False


async def call_tool(
    handler: FaceHandler, principal: Principal, name: str, arguments: dict[str, Any] | None
) -> types.CallToolResult:
    """Invoke the capability `name` for `principal`; `MCPError` (invalid params, "Unknown
    tool") for a tool it is not offered, a result with `isError` for a failed invocation.
    `find_tools` searches the tools offered to `principal`."""
    catalog = handler.catalog
    if name == FIND_TOOLS and offers_search(handler, principal):
        return await find_tools(handler, principal, arguments or {})
    if name == FIND_TOOLS or not catalog.offers(principal, name):
        log.info("mcp_tool_refused", tool=name, principal=principal.name)
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")
    arguments = arguments or {}
    declared = _declares_object(catalog.input_schema(name))
    payload = arguments if declared or "payload" not in arguments else arguments["payload"]
    try:
        request = InvokeRequest(capability=name, payload=payload)
    except ValueError as exc:
        return _failed(ValidationFailed(f"the tool call is not a valid invocation: {exc}"))
    answer = await handler.invoke(request, new_trace(), principal, stream=False)
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


async def find_tools(
    handler: FaceHandler, principal: Principal, arguments: dict[str, Any]
) -> types.CallToolResult:
    """The `top_k` tools offered to `principal` that fit `query` best, best first, as
    `tools/list` shows them, each with the router's calibrated `confidence` in it."""
    query, top_k = arguments.get("query"), arguments.get("top_k", FIND_TOOLS_TOP_K)
    if not isinstance(query, str) or not query.strip() or len(query) > 4000:
        return _failed(ValidationFailed("query: give the user's request as a non-blank string"))
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        return _failed(ValidationFailed(f"top_k: a whole number from 1 to {MAX_TOP_K}"))
    catalog = handler.catalog
    ranked = await catalog.rank(
        query, lambda tag: tag != FIND_TOOLS and catalog.offers(principal, tag), top_k
    )
    tools = []
    for r in ranked:
        tool = _tool(
            LiveCapability(r.capability, r.description, [], catalog.input_schema(r.capability))
        )
        tools.append(
            {**tool.model_dump(by_alias=True, exclude_none=True), "confidence": r.confidence}
        )
    found = {"tools": tools}
    return types.CallToolResult(
        content=[types.TextContent(text=orjson.dumps(found).decode())], structured_content=found
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
