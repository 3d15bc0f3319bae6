"""The coordinator as an A2A v1.0 agent, driven by the official a2a-sdk client."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.types import (
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Role,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, InvalidRequestError
from google.protobuf.json_format import MessageToDict
from pydantic import SecretStr

from agent_reach.config import Settings
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, run_coordinator
from agent_reach.testing.waiting import wait_until

POLICY = """
[[access.invoke]]
principals = ["domain:shop"]
capabilities = ["inventory.*"]
"""


def _message(text: str | None, data: Any = None, **metadata: str) -> Message:
    message = Message(message_id=secrets.token_hex(8), role=Role.ROLE_USER)
    if text:
        message.parts.append(new_text_part(text))
    if data is not None:
        message.parts.append(new_data_part(data))
    if metadata:
        message.metadata.update(metadata)
    return message


async def _send(client: Any, message: Message) -> Any:
    events = [event async for event in client.send_message(SendMessageRequest(message=message))]
    assert len(events) == 1
    return events[0]


@pytest.fixture
def stock_agent(http: httpx.Client) -> Iterator[FakeAgent]:
    agent = FakeAgent(answer={"text": "有货: 3 in Shanghai", "qty": 3})
    with ServerThread(agent) as server:
        registered = http.post(
            "/v1/agents",
            json={
                "id": "stock-1",
                "capabilities": ["inventory.check"],
                "description": "inventory stock check 库存 有没有货",
                "examples": ["is the blue phone in stock"],
                "transport": {"type": "http", "endpoint": f"{server.url}/invoke"},
            },
        )
        assert registered.status_code == 201
        # Texts are routed once the matchers have fitted the new card (in the background).
        wait_until(
            lambda: http.get("/v1/policy").json()["matching"]["current"],
            "the text matchers to fit the catalog",
            timeout_s=30,
        )
        yield agent


@pytest.fixture
async def a2a(coordinator: str) -> AsyncIterator[Any]:
    async with httpx.AsyncClient(timeout=10) as http:
        client = await create_client(coordinator, client_config=ClientConfig(httpx_client=http))
        yield client
        await client.close()


def test_card_lists_live_capabilities_as_skills(
    stock_agent: FakeAgent, http: httpx.Client, coordinator: str
) -> None:
    card = http.get("/.well-known/agent-card.json").json()
    assert card["supportedInterfaces"][0]["url"] == f"{coordinator}/a2a"
    assert [s["id"] for s in card["skills"]] == ["inventory.check"]
    assert "is the blue phone in stock" in card["skills"][0]["examples"]


async def test_skill_named_in_metadata_and_text_routing_both_answer_completed_tasks(
    stock_agent: FakeAgent, a2a: Any
) -> None:
    sent = _message(None, {"sku": "P-1"}, capability="inventory.check")
    directed = (await _send(a2a, sent)).task
    assert (directed.id, directed.status.state) == (sent.message_id, TaskState.TASK_STATE_COMPLETED)
    answer = directed.artifacts[0].parts
    assert get_text_parts(answer) == ["有货: 3 in Shanghai"]
    assert get_data_parts(answer) == [{"text": "有货: 3 in Shanghai", "qty": 3.0}]
    routed = (await _send(a2a, _message("is the blue phone in stock?"))).task
    assert routed.metadata["agent_id"] == "stock-1"
    assert [r.body["payload"] for r in stock_agent.received] == [{"sku": "P-1"}, None]
    assert stock_agent.received[1].body["text"] == "is the blue phone in stock?"
    read = await a2a.get_task(GetTaskRequest(id=directed.id))
    assert MessageToDict(read.artifacts[0]) == MessageToDict(directed.artifacts[0])
    listed = await a2a.list_tasks(ListTasksRequest(include_artifacts=True))
    assert {t.id for t in listed.tasks} == {directed.id, routed.id}


async def test_a_client_that_asks_for_a_message_gets_one_and_no_task_is_listed(
    stock_agent: FakeAgent, a2a: Any
) -> None:
    replied = await _send(a2a, _message("is the blue phone in stock?", reply="message"))
    assert get_text_parts(replied.message.parts) == ["有货: 3 in Shanghai"]
    assert replied.message.metadata["agent_id"] == "stock-1"
    assert list((await a2a.list_tasks(ListTasksRequest())).tasks) == []


async def test_a_resent_message_id_runs_once(stock_agent: FakeAgent, a2a: Any) -> None:
    message = _message("is the blue phone in stock?")
    first = await _send(a2a, message)
    again = await _send(a2a, message)
    assert MessageToDict(first.task.artifacts[0]) == MessageToDict(again.task.artifacts[0])
    assert len(stock_agent.received) == 1


async def test_a_skill_nobody_offers_is_a_rejected_task_and_an_empty_message_an_error(
    stock_agent: FakeAgent, a2a: Any
) -> None:
    declined = await _send(a2a, _message("hello", capability="no.such.skill"))
    assert declined.task.status.state == TaskState.TASK_STATE_REJECTED
    why = get_text_parts(declined.task.status.message.parts)[0]
    assert "no registered agent offers the capability" in why
    assert get_data_parts(declined.task.status.message.parts)[0]["code"] == "no_capability"
    with pytest.raises(InvalidParamsError, match="neither a skill"):
        await _send(a2a, _message(None, {"sku": "P-1"}))
    assert stock_agent.received == []


async def test_async_send_answers_a_task_read_back_with_get_task(
    stock_agent: FakeAgent, a2a: Any, coordinator: str
) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": "async-1",
                "role": "ROLE_USER",
                "parts": [{"data": {"sku": "P-2"}}],
                "metadata": {"capability": "inventory.check"},
            },
            "configuration": {"returnImmediately": True},
        },
    }
    async with httpx.AsyncClient(base_url=coordinator) as plain:
        sent = await plain.post("/a2a", json=body, headers={"A2A-Version": "1.0"})
    answer = sent.json()
    task_id = answer["result"]["task"]["id"]
    for _ in range(200):
        task = await a2a.get_task(GetTaskRequest(id=task_id))
        if task.status.state == TaskState.TASK_STATE_COMPLETED:
            break
        await asyncio.sleep(0.02)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_data_parts(task.artifacts[0].parts)[0]["qty"] == 3
    assert len(stock_agent.received) == 1


def test_v03_message_send_is_answered_in_the_v03_form(
    stock_agent: FakeAgent, http: httpx.Client
) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": "x",
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "messageId": "old-1",
                "role": "user",
                "parts": [{"kind": "text", "text": "is the blue phone in stock"}],
            }
        },
    }
    answer = http.post("/a2a", json=body).json()["result"]
    assert (answer["kind"], answer["status"]["state"]) == ("task", "completed")
    parts = answer["artifacts"][0]["parts"]
    assert parts[0] == {"kind": "text", "text": "有货: 3 in Shanghai"}
    body["params"]["message"] = {
        **body["params"]["message"],
        "messageId": "old-2",
        "metadata": {"reply": "message"},
    }
    replied = http.post("/a2a", json=body).json()["result"]
    assert (replied["kind"], replied["parts"][0]) == ("message", parts[0])


async def _post_a2a(url: str, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=url, timeout=10) as plain:
        return await plain.post("/a2a", json=body, headers=headers)


async def test_keys_and_access_rules_apply(tmp_path: Path) -> None:
    admin = secrets.token_urlsafe(24)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    settings = Settings(
        auth="on", admin_key=SecretStr(admin), policy_file=policy, decision_log="off"
    )
    agent = FakeAgent(answer={"ok": True})
    admin_h = {"authorization": f"Bearer {admin}"}
    with run_coordinator(settings) as (url, _), ServerThread(agent) as server:
        async with httpx.AsyncClient(base_url=url, timeout=10) as plain:
            for tag in ("inventory.check", "payroll.run"):
                registered = await plain.post(
                    "/v1/agents",
                    headers=admin_h,
                    json={
                        "id": tag.replace(".", "-"),
                        "capabilities": [tag],
                        "transport": {"type": "http", "endpoint": f"{server.url}/invoke"},
                    },
                )
                assert registered.status_code == 201
            minted = await plain.post(
                "/v1/keys", headers=admin_h, json={"principal": "shop-app", "domain": "shop"}
            )
            bearer = {"authorization": f"Bearer {minted.json()['key']}"}
            public = (await plain.get("/.well-known/agent-card.json")).json()
            assert public["skills"] == []
            assert "bearer" in public["securitySchemes"]
            mine = (await plain.get("/.well-known/agent-card.json", headers=bearer)).json()
            assert [s["id"] for s in mine["skills"]] == ["inventory.check"]
            anonymous = await plain.post(
                "/a2a",
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendMessage",
                    "params": {
                        "message": {
                            "messageId": "m",
                            "role": "ROLE_USER",
                            "parts": [{"text": "hi"}],
                        }
                    },
                },
            )
            assert anonymous.status_code == 401
            assert anonymous.json()["error"]["data"][0]["metadata"]["code"] == "unauthorized"
        async with httpx.AsyncClient(headers=bearer, timeout=10) as http:
            client = await create_client(
                url,
                client_config=ClientConfig(httpx_client=http),
                resolver_http_kwargs={"headers": bearer},
            )
            sent = _message(None, {"a": 1}, capability="inventory.check")
            ok = await _send(client, sent)
            assert ok.task.metadata["agent_id"] == "inventory-check"
            # its Task reads back for its sender only
            mine = await client.get_task(GetTaskRequest(id=sent.message_id))
            assert mine.status.state == TaskState.TASK_STATE_COMPLETED
            get = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "GetTask",
                "params": {"id": sent.message_id},
            }
            theirs = (await _post_a2a(url, get, admin_h)).json()
            assert theirs["error"]["code"] == -32001, theirs  # TaskNotFoundError
            with pytest.raises(InvalidRequestError, match=r"may not invoke 'payroll\.run'"):
                await _send(client, _message(None, {"a": 1}, capability="payroll.run"))
            await client.close()
        assert len(agent.received) == 1
