"""`/mcp` per caller: each key is listed exactly the tools it may call (issue 30).

Keys of every role, with grants and without, under a policy with access rules, on
memory and Redis, in both protocol eras of the official `mcp` client: for every tool
of the coordinator (and one that does not exist), listed ⇔ a `tools/call` succeeds, and
the refusal is the unknown-tool error. `/v1/invoke` agrees with the list, and the agent
counts only the calls that were allowed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agent_reach.config import Settings
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, run_coordinator

ADMIN = "mcp-face-grants-admin-key-0123456789"
TAGS = ["echo.say", "inventory.check", "inventory.count", "orders.track", "payroll.run"]
GONE = "orders.cancel"  # registered, then deregistered: no live instance
POLICY = """
[[access.invoke]]
principals = ["domain:shop"]
capabilities = ["orders.*"]

[[access.invoke]]
principals = ["name:auditor"]
capabilities = ["payroll.run"]
"""
# key name -> (POST /v1/keys body, the tools it may call)
KEYS: dict[str, tuple[dict[str, object], set[str]]] = {
    "inventory-caller": (
        {"principal": "inv", "role": "caller", "capabilities": ["inventory.*"]},
        {"inventory.check", "inventory.count"},
    ),
    "shop-caller": (
        {"principal": "shop-app", "role": "caller", "domain": "shop", "capabilities": ["echo.say"]},
        {"echo.say", "orders.track"},
    ),
    "auditor": ({"principal": "auditor", "role": "caller"}, {"payroll.run"}),
    "nobody": ({"principal": "stranger", "role": "caller", "domain": "elsewhere"}, set()),
    "observer": ({"principal": "watcher", "role": "observer"}, set()),
    "shop-agent": (
        {"principal": "shop-agent", "role": "agent", "domain": "shop", "capabilities": ["*"]},
        {"orders.track"},  # an agent key's grants are what it may register; the rule lets it call
    ),
    "admin": ({}, set(TAGS)),
}


@pytest.fixture
def world(settings: Settings, tmp_path: Path) -> Iterator[tuple[str, dict[str, str], FakeAgent]]:
    """A secured coordinator (the backend under test) with one agent behind every tag,
    and a key of each kind: (url, key name -> key, the agent)."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    secured = Settings(
        **{**settings.model_dump(), "auth": "on", "policy_file": policy, "admin_key": ADMIN}
    )
    agent = FakeAgent(answer={"text": "done"})
    with (
        run_coordinator(secured) as (url, _),
        ServerThread(agent) as server,
        httpx.Client(base_url=url, headers={"authorization": f"Bearer {ADMIN}"}) as http,
    ):
        for tag in [*TAGS, GONE]:
            body = {
                "id": tag.replace(".", "-"),
                "capabilities": [tag],
                "transport": {"type": "http", "endpoint": f"{server.url}/invoke"},
            }
            assert http.post("/v1/agents", json=body).status_code == 201
        assert http.delete(f"/v1/agents/{GONE.replace('.', '-')}").status_code in (200, 204)
        keys = {"admin": ADMIN}
        for name, (body, _) in KEYS.items():
            if name != "admin":
                answer = http.post("/v1/keys", json=body)
                assert answer.status_code == 201, answer.text
                keys[name] = answer.json()["key"]
        yield url, keys, agent


async def _listed_and_callable(url: str, key: str, mode: str) -> tuple[set[str], set[str]]:
    """The tools listed to `key`, and those a call succeeded on (every tag tried)."""
    async with (
        httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"}) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode) as client,
    ):
        listed = {t.name for t in (await client.list_tools()).tools}
        callable_ = set()
        for tag in [*TAGS, GONE, "no.such.tool"]:
            try:
                called = await client.call_tool(tag, {"payload": {"tag": tag}})
            except MCPError as refused:
                assert (refused.code, refused.message) == (-32602, f"Unknown tool: {tag}")
                continue
            assert not called.is_error, (tag, called)
            assert called.structured_content == {"text": "done"}
            callable_.add(tag)
    return listed, callable_


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_each_key_is_listed_exactly_the_tools_it_may_call(
    world: tuple[str, dict[str, str], FakeAgent], mode: str
) -> None:
    url, keys, agent = world
    allowed_calls = 0
    for name, (_, expected) in KEYS.items():
        listed, callable_ = await _listed_and_callable(url, keys[name], mode)
        assert listed == callable_ == expected, name
        allowed_calls += len(expected)
    # a refused call never reached the agent; an allowed one reached it once
    assert len(agent.received) == allowed_calls
    assert sorted(r.body["payload"]["tag"] for r in agent.received) == sorted(
        tag for _, expected in KEYS.values() for tag in expected
    )


def test_v1_invoke_agrees_with_the_list(world: tuple[str, dict[str, str], FakeAgent]) -> None:
    url, keys, _ = world
    for name, (_, expected) in KEYS.items():
        with httpx.Client(base_url=url, headers={"authorization": f"Bearer {keys[name]}"}) as http:
            invocable = {
                tag
                for tag in TAGS
                if http.post("/v1/invoke", json={"capability": tag, "payload": {}}).status_code
                == 200
            }
        assert invocable == expected, name


async def test_a_policy_change_reaches_the_session_and_changes_its_list(
    world: tuple[str, dict[str, str], FakeAgent],
) -> None:
    url, keys, _ = world
    changes: asyncio.Queue[str] = asyncio.Queue()

    async def on_message(message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", "")
        if method == "notifications/tools/list_changed":
            changes.put_nowait(method)

    async with (
        httpx2.AsyncClient(headers={"authorization": f"Bearer {keys['nobody']}"}) as http,
        Client(
            streamable_http_client(f"{url}/mcp", http_client=http),
            mode="legacy",
            message_handler=on_message,
        ) as client,
    ):
        assert (await client.list_tools()).tools == []
        rule = {"principals": ["domain:elsewhere"], "capabilities": ["echo.say"]}
        admin = httpx.Client(base_url=url, headers={"authorization": f"Bearer {ADMIN}"})
        with admin:
            put = await asyncio.to_thread(
                admin.put, "/v1/policy", json={"access": {"invoke": [rule]}}
            )
        assert put.status_code == 200, put.text
        await asyncio.wait_for(changes.get(), timeout=10)
        listed = await client.list_tools(cache_mode="bypass")
        assert [t.name for t in listed.tools] == ["echo.say"]
        assert not (await client.call_tool("echo.say", {"payload": {"tag": "echo.say"}})).is_error
