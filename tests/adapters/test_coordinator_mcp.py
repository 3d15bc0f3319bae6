"""The coordinator as an MCP server at /mcp, driven by the official `mcp` SDK client."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import SecretStr

from agent_reach.config import Settings
from agent_reach.server.app import create_app
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, run_coordinator

SKU_SCHEMA = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}


def _register(http: httpx.Client, agent_id: str, endpoint: str, tag: str, **extra: Any) -> None:
    body = {
        "id": agent_id,
        "capabilities": [tag],
        "transport": {"type": "http", "endpoint": endpoint},
        **extra,
    }
    assert http.post("/v1/agents", json=body).status_code == 201


@pytest.fixture
def fake_endpoint() -> Iterator[str]:
    with ServerThread(FakeAgent()) as server:
        yield f"{server.url}/invoke"


@pytest.fixture
def agents(http: httpx.Client) -> Iterator[tuple[FakeAgent, str]]:
    agent = FakeAgent(answer={"text": "3 left", "qty": 3})
    with ServerThread(agent) as server:
        _register(
            http,
            "stock-1",
            f"{server.url}/invoke",
            "inventory.check",
            description="inventory stock check",
            input_schema=SKU_SCHEMA,
        )
        _register(http, "echo-1", f"{server.url}/invoke", "echo.say", description="say it back")
        yield agent, f"{server.url}/invoke"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_tools_are_live_capabilities_and_calls_invoke_them(
    agents: tuple[FakeAgent, str], coordinator: str, mode: str
) -> None:
    agent, _ = agents
    async with Client(f"{coordinator}/mcp", mode=mode) as client:  # type: ignore[arg-type]
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"inventory.check", "echo.say"}
        assert tools["inventory.check"].input_schema == SKU_SCHEMA
        assert tools["inventory.check"].description == "inventory stock check"
        assert tools["echo.say"].input_schema["properties"] == {"payload": {}}
        called = await client.call_tool("inventory.check", {"sku": "P-1"})
        assert not called.is_error
        assert called.structured_content == {"text": "3 left", "qty": 3}
        assert called.content[0].text == "3 left"  # type: ignore[union-attr]
        echoed = await client.call_tool("echo.say", {"payload": {"words": "hi"}})
        assert not echoed.is_error
        refused = await client.call_tool("inventory.check", {"qty": 1})
        assert refused.is_error
        assert refused.structured_content["error"]["code"] == "payload_invalid"
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("no.such.tool", {})
        assert (unknown.value.code, unknown.value.message) == (-32602, "Unknown tool: no.such.tool")
    assert [r.body["payload"] for r in agent.received] == [{"sku": "P-1"}, {"words": "hi"}]


async def _wait_for_change(changes: asyncio.Queue[str]) -> None:
    await asyncio.wait_for(changes.get(), timeout=10)


async def test_list_changed_reaches_legacy_sessions(
    agents: tuple[FakeAgent, str], coordinator: str, http: httpx.Client
) -> None:
    _, endpoint = agents
    changes: asyncio.Queue[str] = asyncio.Queue()

    async def on_message(message: Any) -> None:
        if getattr(getattr(message, "root", message), "method", "") == (
            "notifications/tools/list_changed"
        ):
            changes.put_nowait("changed")

    async with Client(f"{coordinator}/mcp", mode="legacy", message_handler=on_message) as client:
        assert len((await client.list_tools()).tools) == 2
        await asyncio.to_thread(
            _register, http, "new-1", endpoint, "orders.track", description="track orders"
        )
        await _wait_for_change(changes)
        names = {t.name for t in (await client.list_tools(cache_mode="bypass")).tools}
        assert "orders.track" in names
        await asyncio.to_thread(http.delete, "/v1/agents/new-1")
        await _wait_for_change(changes)


async def test_list_changed_reaches_listen_streams(settings: Settings, fake_endpoint: str) -> None:
    app = create_app(settings)
    with ServerThread(app) as server, httpx.Client(base_url=server.url) as http:
        async with Client(f"{server.url}/mcp") as client:
            async with client.listen(tools_list_changed=True) as subscription:
                await asyncio.to_thread(
                    _register, http, "new-2", fake_endpoint, "orders.track", description="track"
                )
                event = await asyncio.wait_for(anext(aiter(subscription)), timeout=10)
                assert type(event).__name__ == "ToolsListChanged"
            assert [t.name for t in (await client.list_tools()).tools] == ["orders.track"]
        # The edge server does not see a client's half-close during a streamed answer:
        # end the listen streams as a shutdown would, so the server stops at once.
        assert server.loop is not None
        server.loop.call_soon_threadsafe(app.mcp.listen.close)


def test_keys_and_access_rules_apply(tmp_path: Path) -> None:
    admin = secrets.token_urlsafe(24)
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[[access.invoke]]\nprincipals = ["domain:shop"]\ncapabilities = ["inventory.*"]\n'
    )
    settings = Settings(
        auth="on", admin_key=SecretStr(admin), policy_file=policy, decision_log="off"
    )
    agent = FakeAgent(answer={"ok": True})
    with run_coordinator(settings) as (url, _), ServerThread(agent) as server:
        admin_h = {"authorization": f"Bearer {admin}"}
        with httpx.Client(base_url=url, headers=admin_h) as http:
            for tag in ("inventory.check", "payroll.run"):
                _register(http, tag.replace(".", "-"), f"{server.url}/invoke", tag)
            key = http.post("/v1/keys", json={"principal": "shop", "domain": "shop"}).json()["key"]
            assert http.post("/mcp", json={}, headers={"authorization": ""}).status_code == 401
        asyncio.run(_call_as(url, key))
    assert len(agent.received) == 1


async def _call_as(url: str, key: str) -> None:
    async with (
        httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"}) as h2,
        Client(streamable_http_client(f"{url}/mcp", http_client=h2)) as client,
    ):
        assert [t.name for t in (await client.list_tools()).tools] == ["inventory.check"]
        assert not (await client.call_tool("inventory.check", {"payload": 1})).is_error
        # refused as if it did not exist: the list and the refusal agree
        with pytest.raises(MCPError) as forbidden:
            await client.call_tool("payroll.run", {"payload": 1})
        assert (forbidden.value.code, forbidden.value.message) == (
            -32602,
            "Unknown tool: payroll.run",
        )
