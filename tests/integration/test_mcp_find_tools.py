"""`/mcp`'s `find_tools`: semantic tool search over the tools the caller may call.

The official `mcp` client, in both protocol eras (the 2026 per-request calls take the
edge's fast path), on memory and Redis: two keys granted different groups of ten
description-only tools each search with the same words and are answered only their own
tools, with the input schemas `tools/list` gives them; a key with fewer than ten tools
is neither listed nor may call the search; bad arguments are a tool error naming them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from ranked_kit import HR, PARCEL, SCHEMA, SHOP, secured_catalog

from agent_reach.config import Settings
from agent_reach.testing.fake_agent import FakeAgent

FEW = {"misc.echo": "Repeat the message back", "misc.clock": "Tell the time"}


@pytest.fixture
def world(settings: Settings) -> Iterator[tuple[str, dict[str, str], FakeAgent]]:
    """(url, key name -> key, the agent): keys `shop`, `hr` (ten tools each) and `misc`."""
    with secured_catalog(settings, {"shop": SHOP, "hr": HR, "misc": FEW}) as world:
        yield world


async def _search(url: str, key: str, mode: str, arguments: dict[str, Any]) -> Any:
    """(tools listed, the find_tools call's result) for `key`."""
    async with (
        httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"}, timeout=30) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode) as client,
    ):
        listed = {t.name: t for t in (await client.list_tools()).tools}
        return listed, await client.call_tool("find_tools", arguments)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_each_key_finds_only_its_own_tools(
    world: tuple[str, dict[str, str], FakeAgent], mode: str
) -> None:
    url, keys, agent = world
    for group, tools in (("shop", SHOP), ("hr", HR)):
        for query in (PARCEL, "I need my payslip for March", "今天天气怎么样"):
            for top_k in (1, 3, 10, 50):
                listed, found = await _search(
                    url, keys[group], mode, {"query": query, "top_k": top_k}
                )
                assert set(listed) == {"find_tools", *tools}
                assert not found.is_error, found
                names = [t["name"] for t in found.structured_content["tools"]]
                assert set(names) <= set(tools), (group, query, names)
                assert len(names) == len(set(names)) == min(top_k, len(tools))
                for tool in found.structured_content["tools"]:
                    shown = listed[tool["name"]]
                    assert tool["inputSchema"] == shown.input_schema
                    assert tool["description"] == shown.description
                    assert 0.0 <= tool["confidence"] <= 1.0
    assert agent.received == []  # a search invokes nothing


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_right_tool_comes_first_with_its_schema(
    world: tuple[str, dict[str, str], FakeAgent], mode: str
) -> None:
    url, keys, _ = world
    _, found = await _search(url, keys["shop"], mode, {"query": PARCEL})
    tools = found.structured_content["tools"]
    assert len(tools) == 5  # the default
    assert tools[0]["name"] == "shop.track_parcel"
    assert tools[0]["inputSchema"] == SCHEMA
    _, found = await _search(url, keys["hr"], mode, {"query": "book a week of vacation"})
    assert found.structured_content["tools"][0]["name"] == "hr.leave"


async def test_a_short_list_has_no_search(world: tuple[str, dict[str, str], FakeAgent]) -> None:
    url, keys, _ = world
    async with (
        httpx2.AsyncClient(headers={"authorization": f"Bearer {keys['misc']}"}) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        assert {t.name for t in (await client.list_tools()).tools} == set(FEW)
        with pytest.raises(MCPError) as refused:
            await client.call_tool("find_tools", {"query": "what time is it"})
        assert (refused.value.code, refused.value.message) == (-32602, "Unknown tool: find_tools")


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({}, "query"),
        ({"query": "   "}, "query"),
        ({"query": 3}, "query"),
        ({"query": PARCEL, "top_k": 0}, "top_k"),
        ({"query": PARCEL, "top_k": 51}, "top_k"),
        ({"query": PARCEL, "top_k": True}, "top_k"),
    ],
)
async def test_bad_arguments_are_a_tool_error_naming_them(
    world: tuple[str, dict[str, str], FakeAgent], arguments: dict[str, Any], field: str
) -> None:
    url, keys, _ = world
    async with (
        httpx2.AsyncClient(headers={"authorization": f"Bearer {keys['shop']}"}) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="legacy") as client,
    ):
        try:
            found = await client.call_tool("find_tools", arguments)
        except MCPError as refused:  # the SDK may check the arguments against the schema
            assert field in refused.message
            return
    assert found.is_error
    assert found.structured_content["error"]["code"] == "validation_error"
    assert found.content[0].text.startswith(f"validation_error: {field}:")
