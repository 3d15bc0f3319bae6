"""A `tools/call` result as the caller's result (or as the tool's own failure).

`structuredContent` is the result as it is. Without it, a tool whose whole content is one
text item holding a JSON object gives that object (the official Python SDK's FastMCP 1.x,
and any tool declared without structured output, returns a dict that way); otherwise the
text content is `{"text": ...}` (every text item, joined by newlines) and any other
content (images, resources) comes along as `content`. `isError: true` is the tool saying
it failed: a final agent error (502 `mcp_tool_error`) carrying what it said, never retried.
"""

from __future__ import annotations

from typing import Any

import orjson

from agent_reach.errors import AgentFailed
from agent_reach.wire.http_body import Shaped


def result_of(result: dict[str, Any]) -> Shaped:
    """The caller's result; `AgentFailed` (final) when the tool reported an error."""
    structured = result.get("structuredContent")
    given = result.get("content")
    content: list[Any] = given if isinstance(given, list) else []
    texts = [c["text"] for c in content if isinstance(c, dict) and c.get("type") == "text"]
    others = [c for c in content if not (isinstance(c, dict) and c.get("type") == "text")]
    said: dict[str, Any] = {"text": "\n".join(str(t) for t in texts)}
    if others:
        said["content"] = others
    if result.get("isError") is True:
        raise AgentFailed(  # it ran and said no: final
            f"the tool failed: {said['text'][:200]}" if texts else "the tool failed",
            code="mcp_tool_error",
            retryable=False,
            agent_answer=structured if structured is not None else said,
        )
    if structured is not None:
        return Shaped(structured, "json")
    if len(content) == 1 and len(texts) == 1:
        document = _json_object(str(texts[0]))
        if document is not None:
            return Shaped(document, "json")
    return Shaped(said, "text")


def _json_object(text: str) -> dict[str, Any] | None:
    """The JSON object `text` holds whole, or None (a list, a number, prose)."""
    if not text.lstrip().startswith("{"):  # most prose is out at the first character
        return None
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return document if isinstance(document, dict) else None
