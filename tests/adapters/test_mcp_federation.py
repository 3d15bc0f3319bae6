"""MCP servers as agents: the official Python SDK's server and the TypeScript SDK's,
each a child process on 127.0.0.1 counting its executions, behind a real coordinator
(memory and Redis)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from peers.mcp_servers import McpServer
from pydantic import SecretStr

from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_until

TOOLS = ["charge", "echo", "grow", "order_status", "refund"]


@pytest.fixture(params=["python", "typescript"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[McpServer]:
    started = McpServer(request.param, tmp_path / "ledger.txt").start()
    try:
        yield started
    finally:
        started.kill()


def register(http: httpx.Client, server: McpServer, **more: Any) -> httpx.Response:
    transport = {"type": "mcp", "endpoint": server.url, **more.pop("transport", {})}
    body = {"id": "shop", "transport": transport, "ttl": 600, **more}
    return http.post("/v1/agents", json=body)


def test_tools_are_capabilities_routed_by_name_and_by_text(
    http: httpx.Client, server: McpServer
) -> None:
    registered = register(http, server)
    assert registered.status_code == 201, registered.text
    view = registered.json()
    assert sorted(view["capabilities"]) == [f"shop.{tool}" for tool in TOOLS]
    assert view["display_name"] == f"{server.kind}-tools"
    by_name = http.post(
        "/v1/invoke", json={"capability": "shop.order_status", "payload": {"order_id": "ORD-1234"}}
    )
    assert by_name.status_code == 200, by_name.text
    assert by_name.json()["result"] == {"order_id": "ORD-1234", "status": "shipped"}
    by_text = http.post(
        "/v1/invoke", json={"text": "where is my order ORD-5678? delivery status please"}
    )
    assert by_text.status_code == 200, by_text.text
    assert by_text.json()["route"]["capability"] == "shop.order_status"
    assert by_text.json()["result"] == {"order_id": "ORD-5678", "status": "shipped"}
    text_only = http.post(
        "/v1/invoke", json={"capability": "shop.echo", "payload": {"sentence": "hello"}}
    )
    assert text_only.status_code == 200, text_only.text
    assert text_only.json()["result"] == {"text": "you said: hello"}
    assert server.executions() == [
        {"tool": "order_status", "order_id": "ORD-1234"},
        {"tool": "order_status", "order_id": "ORD-5678"},
        {"tool": "echo", "sentence": "hello"},
    ]


def test_a_tool_error_is_a_final_agent_error(http: httpx.Client, server: McpServer) -> None:
    assert register(http, server, timeout_class="reasoning").status_code == 201
    refused = http.post(
        "/v1/invoke", json={"capability": "shop.refund", "payload": {"payment_id": "p-1"}}
    )
    assert refused.status_code == 502, refused.text
    error = refused.json()["error"]
    assert error["code"] == "mcp_tool_error"
    assert "cannot be refunded" in str(error["agent_answer"])
    assert len(server.executions("refund")) == 1


def test_a_call_whose_answer_was_lost_is_not_sent_again(
    http: httpx.Client, server: McpServer
) -> None:
    # reasoning: a class with a retry, which a lost answer must still not use
    assert register(http, server, timeout_class="reasoning").status_code == 201
    lost = http.post("/v1/invoke", json={"capability": "shop.charge", "payload": {"amount": 5}})
    assert lost.status_code in (502, 504), lost.text
    assert lost.json()["error"]["outcome_unknown"] is True
    assert len(lost.json()["error"]["attempts"]) == 1
    server.kill()
    server.start()
    again = http.post("/v1/invoke", json={"capability": "shop.echo", "payload": {"sentence": "x"}})
    assert again.status_code == 200, again.text  # a new session with the new process
    assert [run["tool"] for run in server.executions()] == ["charge", "echo"]


def test_ping_health_follows_the_server_and_its_session_is_renewed(
    settings: Settings, server: McpServer
) -> None:
    fast = settings.model_copy(update={"probe_interval_s": 0.1, "probe_timeout_s": 0.5})
    with run_coordinator(fast) as (url, _), httpx.Client(base_url=url, timeout=10) as http:
        assert register(http, server).status_code == 201

        def status() -> str:
            return str(http.get("/v1/agents/shop").json()["status"])

        wait_until(lambda: status() == "healthy", "the first ping to pass")
        server.kill()
        wait_until(lambda: status() == "offline", "pings to fail the server out", 30)
        server.start()
        wait_until(lambda: status() == "healthy", "a ping in a new session to pass", 30)
        answer = http.post(
            "/v1/invoke", json={"capability": "shop.echo", "payload": {"sentence": "back"}}
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"] == {"text": "you said: back"}


def test_a_new_tool_becomes_a_capability_when_the_list_changes(
    http: httpx.Client, server: McpServer
) -> None:
    assert register(http, server).status_code == 201
    grown = http.post("/v1/invoke", json={"capability": "shop.grow", "payload": {}})
    assert grown.status_code == 200, grown.text

    def capabilities() -> list[str]:
        return list(http.get("/v1/agents/shop").json()["capabilities"])

    wait_until(lambda: "shop.translate" in capabilities(), "the new tool to be a capability")
    answer = http.post(
        "/v1/invoke", json={"capability": "shop.translate", "payload": {"sentence": "hi"}}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"] == {"text": "HI"}
    assert [run["tool"] for run in server.executions()] == ["grow", "translate"]


def test_tools_may_be_renamed_or_left_out_and_a_taken_name_is_refused(
    http: httpx.Client, server: McpServer
) -> None:
    other = {
        "id": "tracker",
        "capabilities": ["orders.track"],
        "transport": {"type": "http", "endpoint": "http://127.0.0.1:9/invoke"},
    }
    assert http.post("/v1/agents", json=other).status_code == 201
    clash = register(http, server, transport={"tools": {"order_status": "orders.track"}})
    assert clash.status_code == 409, clash.text
    assert clash.json()["error"]["code"] == "capability_name_taken"
    assert http.get("/v1/agents/shop").status_code == 404
    mapped = register(
        http, server, transport={"tools": {"order_status": "orders.status", "charge": None}}
    )
    assert mapped.status_code == 201, mapped.text
    assert sorted(mapped.json()["capabilities"]) == [
        "orders.status",
        "shop.echo",
        "shop.grow",
        "shop.refund",
    ]
    answer = http.post(
        "/v1/invoke", json={"capability": "orders.status", "payload": {"order_id": "ORD-0001"}}
    )
    assert answer.status_code == 200, answer.text
    assert server.executions() == [{"tool": "order_status", "order_id": "ORD-0001"}]


def test_registrations_that_cannot_work_are_refused(http: httpx.Client, server: McpServer) -> None:
    nothing_there = http.post(
        "/v1/agents",
        json={"id": "gone", "transport": {"type": "mcp", "endpoint": "http://127.0.0.1:9/mcp"}},
    )
    assert nothing_there.status_code == 422, nothing_there.text
    assert nothing_there.json()["error"]["code"] == "mcp_server_unreachable"
    named = register(http, server, capabilities=["shop.echo"])
    assert named.status_code == 422, named.text
    assert named.json()["error"]["field"] == "capabilities"


def test_with_keys_on_the_tools_are_the_capabilities_a_key_must_grant(
    settings: Settings, tmp_path: Path
) -> None:
    admin = "mcp-federation-admin-key-0123456789"
    secured = settings.model_copy(update={"auth": "on", "admin_key": SecretStr(admin)})
    server = McpServer("python", tmp_path / "ledger.txt").start()
    try:
        with run_coordinator(secured) as (url, _), httpx.Client(base_url=url, timeout=10) as http:

            def key(principal: str, role: str, capabilities: list[str]) -> dict[str, str]:
                body = {"principal": principal, "role": role, "capabilities": capabilities}
                made = http.post(
                    "/v1/keys", json=body, headers={"authorization": f"Bearer {admin}"}
                )
                assert made.status_code == 201, made.text
                return {"authorization": f"Bearer {made.json()['key']}"}

            body = {"id": "shop", "transport": {"type": "mcp", "endpoint": server.url}}
            narrow = key("narrow", "agent", ["shop.echo"])
            assert http.post("/v1/agents", json=body, headers=narrow).status_code == 403
            caller = key("caller", "caller", ["shop.*"])
            assert http.post("/v1/agents", json=body, headers=caller).status_code == 403
            owner = key("owner", "agent", ["shop.*"])
            registered = http.post("/v1/agents", json=body, headers=owner)
            assert registered.status_code == 201, registered.text
            called = http.post(
                "/v1/invoke",
                json={"capability": "shop.echo", "payload": {"sentence": "hi"}},
                headers=caller,
            )
            assert called.status_code == 200, called.text
            assert server.executions() == [{"tool": "echo", "sentence": "hi"}]
    finally:
        server.kill()


async def test_the_coordinators_own_mcp_endpoint_serves_every_federated_server(
    coordinator: str, http: httpx.Client, tmp_path: Path
) -> None:
    servers = {
        kind: McpServer(kind, tmp_path / f"{kind}.txt").start() for kind in ("python", "typescript")
    }
    try:
        for kind, server in servers.items():
            body = {"id": kind[:2], "transport": {"type": "mcp", "endpoint": server.url}}
            assert (await asyncio.to_thread(http.post, "/v1/agents", json=body)).status_code == 201
        async with Client(f"{coordinator}/mcp", mode="legacy") as client:  # type: ignore[arg-type]
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert {f"{prefix}.{tool}" for prefix in ("py", "ty") for tool in TOOLS} <= set(tools)
            assert tools["ty.order_status"].input_schema["properties"]["order_id"]["pattern"]
            called = await client.call_tool("ty.order_status", {"order_id": "ORD-4242"})
            assert not called.is_error
            assert called.structured_content == {"order_id": "ORD-4242", "status": "shipped"}
        assert servers["typescript"].executions() == [
            {"tool": "order_status", "order_id": "ORD-4242"}
        ]
        assert servers["python"].executions() == []
    finally:
        for server in servers.values():
            server.kill()
