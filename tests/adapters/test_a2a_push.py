"""A2A push notifications from the coordinator's face to a real local webhook: each state
of a task delivered exactly once (with two coordinators on Redis watching the same task),
with the client's token, retried after a refusal; the config operations on both names."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import (
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import InvalidParamsError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agent_reach.config import Settings
from agent_reach.testing.servers import ServerThread, run_coordinator
from agent_reach.testing.waiting import wait_until

TOKEN = "hook-secret-1"


class Webhook:
    """Records each push: (task id, state, token header); refuses the first `refuse` POSTs."""

    def __init__(self, refuse: int = 0) -> None:
        self.pushes: list[tuple[str, str, str | None]] = []
        self.attempts = 0
        self.refuse = refuse

    async def receive(self, request: Request) -> JSONResponse:
        self.attempts += 1
        if self.attempts <= self.refuse:
            return JSONResponse({"busy": True}, status_code=503)
        task = (await request.json())["task"]
        token = request.headers.get("x-a2a-notification-token")
        self.pushes.append((task["id"], task["status"]["state"], token))
        return JSONResponse({})

    def states(self, task_id: str) -> Counter[str]:
        return Counter(state for tid, state, _ in self.pushes if tid == task_id)


class GatedAgent:
    def __init__(self) -> None:
        self.gate = threading.Event()
        self.calls = 0

    async def invoke(self, request: Request) -> JSONResponse:
        self.calls += 1
        await request.body()
        await asyncio.to_thread(self.gate.wait, 30)
        return JSONResponse({"text": "report ready"})

    async def health(self, request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})


def _serve(webhook: Webhook) -> ServerThread:
    return ServerThread(Starlette(routes=[Route("/hook", webhook.receive, methods=["POST"])]))


@pytest.fixture
def gated(http: httpx.Client) -> Iterator[GatedAgent]:
    agent = GatedAgent()
    app = Starlette(
        routes=[
            Route("/invoke", agent.invoke, methods=["POST"]),
            Route("/health", agent.health),
        ]
    )
    with ServerThread(app) as server:
        registered = http.post(
            "/v1/agents",
            json={
                "id": "slow-1",
                "capabilities": ["report.build"],
                "transport": {"type": "http", "endpoint": f"{server.url}/invoke"},
            },
        )
        assert registered.status_code == 201, registered.text
        try:
            yield agent
        finally:
            agent.gate.set()


def _send(
    http: httpx.Client, message_id: str, hook: str | None = None, *, wait: bool = False
) -> dict[str, Any]:
    configuration: dict[str, Any] = {"returnImmediately": not wait}
    if hook:
        configuration["taskPushNotificationConfig"] = {"url": hook, "token": TOKEN}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": message_id,
                "role": "ROLE_USER",
                "parts": [{"data": {"n": 1}}],
                "metadata": {"capability": "report.build"},
            },
            "configuration": configuration,
        },
    }
    answer = http.post("/a2a", json=body, headers={"A2A-Version": "1.0"}).json()
    task: dict[str, Any] = answer["result"]["task"]
    return task


def test_each_state_of_a_task_is_pushed_once_with_the_clients_token(
    http: httpx.Client, gated: GatedAgent
) -> None:
    webhook = Webhook()
    with _serve(webhook) as hook:
        task = _send(http, "push-1", f"{hook.url}/hook")
        wait_until(lambda: webhook.states(task["id"])["TASK_STATE_WORKING"], "the working push")
        # A task made now is first pushed by a later look, which sees the first one still
        # working: had it pushed that state again, the webhook would have it twice.
        second = _send(http, "push-2", f"{hook.url}/hook")
        wait_until(lambda: webhook.states(second["id"])["TASK_STATE_WORKING"], "a later look")
        gated.gate.set()
        wait_until(lambda: webhook.states(task["id"])["TASK_STATE_COMPLETED"], "the final push")
        # A task made after the first ended: its final push proves looks went on after.
        third = _send(http, "push-3", f"{hook.url}/hook")
        wait_until(lambda: webhook.states(third["id"])["TASK_STATE_COMPLETED"], "a later push")
    for made in (task, second):
        counts = webhook.states(made["id"])
        assert {"TASK_STATE_WORKING", "TASK_STATE_COMPLETED"} <= set(counts)
        assert set(counts) <= {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"}
        assert all(n == 1 for n in counts.values()), counts
    assert {token for _, _, token in webhook.pushes} == {TOKEN}
    assert gated.calls == 3


def test_a_config_given_with_a_blocking_send_gets_the_completed_task_once(
    http: httpx.Client, gated: GatedAgent
) -> None:
    gated.gate.set()
    webhook = Webhook()
    with _serve(webhook) as hook:
        task = _send(http, "push-blocking", f"{hook.url}/hook", wait=True)
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        wait_until(lambda: webhook.states(task["id"])["TASK_STATE_COMPLETED"], "the push")
        later = _send(http, "push-blocking-2", f"{hook.url}/hook", wait=True)
        wait_until(lambda: webhook.states(later["id"])["TASK_STATE_COMPLETED"], "a later push")
    assert webhook.states(task["id"]) == Counter({"TASK_STATE_COMPLETED": 1})


def test_a_refused_push_is_retried_and_delivered_once(
    http: httpx.Client, gated: GatedAgent
) -> None:
    gated.gate.set()
    webhook = Webhook(refuse=1)
    with _serve(webhook) as hook:
        task = _send(http, "push-retry", f"{hook.url}/hook")
        wait_until(lambda: webhook.states(task["id"])["TASK_STATE_COMPLETED"], "the final push")
        later = _send(http, "push-retry-2", f"{hook.url}/hook")
        wait_until(lambda: webhook.states(later["id"])["TASK_STATE_COMPLETED"], "a later push")
    assert all(n == 1 for n in webhook.states(task["id"]).values())
    assert webhook.attempts == len(webhook.pushes) + 1  # the refused one, then its retry


@pytest.fixture
async def client(coordinator: str) -> AsyncIterator[Any]:
    async with httpx.AsyncClient(timeout=10) as plain:
        made = await create_client(coordinator, client_config=ClientConfig(httpx_client=plain))
        yield made
        await made.close()


async def test_push_configs_are_created_read_listed_and_deleted(
    http: httpx.Client, gated: GatedAgent, client: Any
) -> None:
    task = _send(http, "push-crud")
    webhook = "http://127.0.0.1:9/hook"
    made = await client.create_task_push_notification_config(
        TaskPushNotificationConfig(task_id=task["id"], id="c1", url=webhook, token=TOKEN)
    )
    assert (made.id, made.url, made.token) == ("c1", webhook, TOKEN)
    read = await client.get_task_push_notification_config(
        GetTaskPushNotificationConfigRequest(task_id=task["id"], id="c1")
    )
    assert read.url == webhook
    listed = await client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=task["id"])
    )
    assert [c.id for c in listed.configs] == ["c1"]
    old = {"jsonrpc": "2.0", "id": 2, "method": "tasks/pushNotificationConfig/list"}
    posted = await asyncio.to_thread(http.post, "/a2a", json={**old, "params": {"id": task["id"]}})
    v03 = posted.json()["result"]
    assert v03[0]["pushNotificationConfig"]["url"] == webhook
    await client.delete_task_push_notification_config(
        DeleteTaskPushNotificationConfigRequest(task_id=task["id"], id="c1")
    )
    listed = await client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=task["id"])
    )
    assert list(listed.configs) == []
    with pytest.raises(InvalidParamsError, match="outside the allowed networks"):
        await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task["id"], url="http://169.254.169.254/x")
        )


def test_two_coordinators_on_redis_push_each_state_once(redis_url: str, redis_prefix: str) -> None:
    settings = Settings(
        decision_log="off", registry_backend="redis", redis_url=redis_url, redis_prefix=redis_prefix
    )
    agent = GatedAgent()
    webhook = Webhook()
    app = Starlette(
        routes=[Route("/invoke", agent.invoke, methods=["POST"]), Route("/health", agent.health)]
    )
    with (
        run_coordinator(settings) as (one, _),
        run_coordinator(settings) as (two, _),
        ServerThread(app) as server,
        _serve(webhook) as hook,
        httpx.Client(base_url=one, timeout=10) as first,
        httpx.Client(base_url=two, timeout=10) as second,
    ):
        registered = first.post(
            "/v1/agents",
            json={
                "id": "slow-1",
                "capabilities": ["report.build"],
                "transport": {"type": "http", "endpoint": f"{server.url}/invoke"},
            },
        )
        assert registered.status_code == 201
        task = _send(first, "push-two")
        config = {"url": f"{hook.url}/hook", "token": TOKEN}
        body = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "CreateTaskPushNotificationConfig",
            "params": {"taskId": task["id"], **config},
        }
        made = second.post("/a2a", json=body).json()  # set at the other coordinator
        assert made["result"]["url"] == config["url"], made
        wait_until(lambda: webhook.states(task["id"])["TASK_STATE_WORKING"], "the working push")
        both = _send(second, "push-two-both", f"{hook.url}/hook")  # see the first test
        wait_until(lambda: webhook.states(both["id"])["TASK_STATE_WORKING"], "a later look")
        agent.gate.set()
        wait_until(lambda: webhook.states(task["id"])["TASK_STATE_COMPLETED"], "the final push")
        later = _send(second, "push-two-later", f"{hook.url}/hook")
        wait_until(lambda: webhook.states(later["id"])["TASK_STATE_COMPLETED"], "a later push")
    for made in (task, both):
        counts = webhook.states(made["id"])
        assert {"TASK_STATE_WORKING", "TASK_STATE_COMPLETED"} <= set(counts)
        assert all(n == 1 for n in counts.values()), webhook.pushes
    assert agent.calls == 3
