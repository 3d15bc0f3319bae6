"""`/mcp` with a delegation token: an agent handed a task lists exactly what it may
hand on, on behalf of its caller (issue 30 with the Agent Mesh).

The caller may invoke `cs.*`, `order.*` and `payroll.*`; the cs agents may delegate
`order.*` only. During its delivery the cs agent connects to `/mcp` with the delivery's
token (the official `mcp` client): it is listed the `order.*` tools — not `payroll.run`
(no delegate rule) nor `cs.answer` (handing the task back would be a cycle) — calls one
through, and is refused the others as unknown tools. Memory and Redis.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agent_reach.config import Settings
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, run_coordinator

ADMIN = "mcp-face-delegated-admin-key-0123456789"
POLICY = """
[[access.delegate]]
principals = ["name:cs-agents"]
capabilities = ["order.*"]
"""


def delegating_agent(mcp_url: str, seen: dict[str, Any]) -> Starlette:
    """An agent that, for each delivery, uses /mcp with the delivery's delegation token."""

    async def invoke(request: Request) -> JSONResponse:
        token = (await request.json())["delegation"]["token"]
        async with (
            httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}) as http,
            Client(streamable_http_client(mcp_url, http_client=http)) as client,
        ):
            seen["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
            called = await client.call_tool("order.track", {"payload": {"order": "A-1"}})
            seen["called"] = called.structured_content
            seen["refused"] = {}
            for tag in ("cs.answer", "payroll.run"):
                try:
                    await client.call_tool(tag, {"payload": {}})
                except MCPError as refused:
                    seen["refused"][tag] = refused.code
        return JSONResponse({"answered": True})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[Route("/invoke", invoke, methods=["POST"]), Route("/health", health)])


@pytest.fixture
def world(settings: Settings, tmp_path: Path) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(url, the caller's key, what the cs agent saw)."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    options = {"auth": "on", "admin_key": ADMIN, "policy_file": policy}
    secured = Settings(**{**settings.model_dump(), **options})
    seen: dict[str, Any] = {}
    with (
        run_coordinator(secured) as (url, _),
        ServerThread(delegating_agent(f"{url}/mcp", seen)) as cs_bot,
        ServerThread(FakeAgent(answer={"status": "shipped"})) as others,
        httpx.Client(base_url=url, headers={"authorization": f"Bearer {ADMIN}"}) as admin,
    ):

        def key(principal: str, role: str, grants: list[str]) -> str:
            body = {"principal": principal, "role": role, "capabilities": grants}
            minted = admin.post("/v1/keys", json=body)
            assert minted.status_code == 201, minted.text
            return str(minted.json()["key"])

        caller = key("shop-frontend", "caller", ["cs.*", "order.*", "payroll.*"])
        cs_key = key("cs-agents", "agent", ["cs.*"])
        registration = {
            "id": "cs-bot",
            "capabilities": ["cs.answer"],
            "timeout_class": "reasoning",
            "transport": {"type": "http", "endpoint": f"{cs_bot.url}/invoke"},
        }
        registered = httpx.post(
            f"{url}/v1/agents", json=registration, headers={"authorization": f"Bearer {cs_key}"}
        )
        assert registered.status_code == 201, registered.text
        for tag in ("order.track", "order.cancel", "payroll.run"):
            body = {
                "id": tag.replace(".", "-"),
                "capabilities": [tag],
                "transport": {"type": "http", "endpoint": f"{others.url}/invoke"},
            }
            assert admin.post("/v1/agents", json=body).status_code == 201
        yield url, caller, seen


def test_a_delegated_agent_is_listed_exactly_what_it_may_hand_on(
    world: tuple[str, str, dict[str, Any]],
) -> None:
    url, caller, seen = world
    answer = httpx.post(
        f"{url}/v1/invoke",
        json={"capability": "cs.answer", "payload": {"question": "where is A-1?"}},
        headers={"authorization": f"Bearer {caller}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert seen["tools"] == ["order.cancel", "order.track"]
    assert seen["called"] == {"status": "shipped"}
    assert seen["refused"] == {"cs.answer": -32602, "payroll.run": -32602}
