"""A `tools/call` result as the caller's result: structured content, a JSON object sent as
text, plain text, other content, and a tool's error."""

from __future__ import annotations

from typing import Any

import pytest

from agent_reach.errors import AgentFailed
from agent_reach.federation.results import result_of


def _text(*texts: str, **more: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": t} for t in texts], **more}


def test_structured_content_is_the_result_as_it_is() -> None:
    shaped = result_of(_text('{"a": 1}', structuredContent={"b": 2}))
    assert (shaped.value, shaped.normalized) == ({"b": 2}, "json")


def test_one_text_item_holding_a_json_object_is_that_object() -> None:
    # what FastMCP 1.x (and MCPServer without structured output) sends for a dict
    shaped = result_of(_text('{\n  "weight_kg": 2.5,\n  "carrier": "DHL"\n}'))
    assert (shaped.value, shaped.normalized) == ({"weight_kg": 2.5, "carrier": "DHL"}, "json")
    assert result_of(_text('  {"nested": {"ok": [1, 2]}}\n')).value == {"nested": {"ok": [1, 2]}}


@pytest.mark.parametrize(
    "result",
    [
        _text("[1, 2]"),  # a list is no object
        _text("42"),
        _text('"quoted"'),
        _text("{not json}"),
        _text("you said: {hello}"),
        _text('{"a": 1}', '{"b": 2}'),  # two items: text, as before
        {
            "content": [
                {"type": "text", "text": '{"a": 1}'},
                {"type": "image", "data": "AA==", "mimeType": "image/png"},
            ]
        },
    ],
)
def test_anything_else_stays_text(result: dict[str, Any]) -> None:
    shaped = result_of(result)
    assert shaped.normalized == "text"
    assert shaped.value["text"] == "\n".join(
        c["text"] for c in result["content"] if c["type"] == "text"
    )


def test_a_tools_error_is_final_even_when_it_is_json() -> None:
    with pytest.raises(AgentFailed) as failed:
        result_of(_text('{"error": "no such parcel"}', isError=True))
    assert failed.value.code == "mcp_tool_error"
    assert failed.value.retryable is False
