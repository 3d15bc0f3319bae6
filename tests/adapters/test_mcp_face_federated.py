"""One MCP endpoint for many servers: federated MCP servers' tools on `/mcp`, per caller.

The official Python SDK's MCP server and the TypeScript SDK's, each registered as an
agent (`transport: {"type": "mcp"}`), beside a plain HTTP agent, behind a secured
coordinator (memory and Redis). An MCP client sees one server whose tools are exactly
what its key may call across all of them, calls them through, and is refused the rest;
the servers count one execution per allowed call.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from peers.mcp_servers import McpServer

from agent_reach.config import Settings
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, run_coordinator

ADMIN = "mcp-face-federated-admin-key-0123456789"
SERVER_TOOLS = ["charge", "echo", "grow", "order_status", "refund"]
# key -> its grants
GRANTS = {
    "py-orders": ["py.order_status"],
    "ts-everything": ["ts.*"],
    "mixed": ["py.echo", "ts.order_status", "local.hello"],
}


@pytest.fixture
def world(
    settings: Settings, tmp_path: Path
) -> Iterator[tuple[str, dict[str, str], dict[str, McpServer]]]:
    """Both SDKs' MCP servers registered as agents `py` and `ts`, an HTTP agent `local`
    (`local.hello`), and a caller key per entry of GRANTS: (url, keys, servers)."""
    secured = Settings(**{**settings.model_dump(), "auth": "on", "admin_key": ADMIN})
    servers = {
        "py": McpServer("python", tmp_path / "py.txt").start(),
        "ts": McpServer("typescript", tmp_path / "ts.txt").start(),
    }
    try:
        with (
            run_coordinator(secured) as (url, _),
            ServerThread(FakeAgent(answer={"text": "hello"})) as local,
            httpx.Client(base_url=url, headers={"authorization": f"Bearer {ADMIN}"}) as http,
        ):
            for agent_id, server in servers.items():
                body = {"id": agent_id, "transport": {"type": "mcp", "endpoint": server.url}}
                assert http.post("/v1/agents", json=body).status_code == 201
            body = {
                "id": "local",
                "capabilities": ["local.hello"],
                "transport": {"type": "http", "endpoint": f"{local.url}/invoke"},
            }
            assert http.post("/v1/agents", json=body).status_code == 201
            keys = {}
            for name, grants in GRANTS.items():
                minted = http.post("/v1/keys", json={"principal": name, "capabilities": grants})
                assert minted.status_code == 201, minted.text
                keys[name] = minted.json()["key"]
            yield url, keys, servers
    finally:
        for server in servers.values():
            server.kill()


async def test_one_endpoint_lists_and_calls_each_keys_tools_across_servers(
    world: tuple[str, dict[str, str], dict[str, McpServer]],
) -> None:
    url, keys, servers = world
    expected = {
        "py-orders": ["py.order_status"],
        "ts-everything": [f"ts.{tool}" for tool in SERVER_TOOLS],
        "mixed": ["local.hello", "py.echo", "ts.order_status"],
    }
    for name, key in keys.items():
        async with (
            httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"}) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
        ):
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert sorted(tools) == expected[name], name
            for tag in ("py.order_status", "ts.order_status"):
                if tag in tools:
                    assert tools[tag].input_schema["properties"]["order_id"]["type"] == "string"
                    called = await client.call_tool(tag, {"order_id": f"ORD-{len(name)}000"})
                    assert not called.is_error, called
                    assert called.structured_content == {
                        "order_id": f"ORD-{len(name)}000",
                        "status": "shipped",
                    }
                else:
                    with pytest.raises(MCPError) as refused:
                        await client.call_tool(tag, {"order_id": "ORD-9999"})
                    assert refused.value.code == -32602
    # one execution per allowed call, none for a refused one
    assert servers["py"].executions() == [{"tool": "order_status", "order_id": "ORD-9000"}]
    assert servers["ts"].executions() == [
        {"tool": "order_status", "order_id": "ORD-13000"},
        {"tool": "order_status", "order_id": "ORD-5000"},
    ]
