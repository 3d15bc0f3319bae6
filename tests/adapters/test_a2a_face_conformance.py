"""The coordinator's A2A face against the A2A v1.0 rules a conformance run checks: JSON-RPC
envelope errors, declined messages as rejected Tasks, ListTasks paging, CancelTask codes,
continuation and history, the public card, version negotiation, and the HTTP+JSON binding
driven by the official a2a-sdk client."""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import orjson
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_data_parts, get_text_parts, new_text_part
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Role,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError
from google.protobuf.json_format import ParseDict
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agent_reach.config import Settings
from agent_reach.testing.servers import ServerThread, run_coordinator
from agent_reach.testing.waiting import wait_until

V1 = {"A2A-Version": "1.0"}


def _rpc(http: httpx.Client, method: str, params: Any, call_id: Any = 1, **headers: str) -> Any:
    body = {"jsonrpc": "2.0", "id": call_id, "method": method, "params": params}
    answer = http.post("/a2a", json=body, headers={**V1, **headers})
    assert answer.status_code == 200, answer.text
    return answer.json()


def _data(error: dict[str, Any]) -> dict[str, Any]:
    """A JSON-RPC error's data as A2A v1.0.1 types it: one `google.rpc.ErrorInfo`."""
    [info] = error["data"]
    assert (info["@type"], info["domain"]) == (
        "type.googleapis.com/google.rpc.ErrorInfo",
        "a2a-protocol.org",
    )
    data: dict[str, Any] = info["metadata"]
    return data


def _decline(http: httpx.Client, context_id: str | None = None) -> dict[str, Any]:
    """A message naming a skill nobody offers: a rejected Task."""
    message: dict[str, Any] = {
        "messageId": secrets.token_hex(8),
        "role": "ROLE_USER",
        "parts": [{"text": "please"}],
        "metadata": {"capability": "no.such.skill"},
    }
    if context_id:
        message["contextId"] = context_id
    task: dict[str, Any] = _rpc(http, "SendMessage", {"message": message})["result"]["task"]
    return task


class GatedAgent:
    """An agent-contract app that answers only once the test opens its gate."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.calls = 0

    async def invoke(self, request: Request) -> JSONResponse:
        self.calls += 1
        await request.body()
        await asyncio.to_thread(self.gate.wait, 30)  # the test opens it
        return JSONResponse({"text": "done"})

    async def health(self, request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/invoke", self.invoke, methods=["POST"]),
                Route("/health", self.health),
            ]
        )


@pytest.fixture
def gated(http: httpx.Client) -> Iterator[GatedAgent]:
    agent = GatedAgent()
    with ServerThread(agent.app()) as server:
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


def _async_send(http: httpx.Client, message_id: str, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "message": {
            "messageId": message_id,
            "role": "ROLE_USER",
            "parts": [{"data": {"n": 1}}],
            "metadata": {"capability": "report.build"},
        },
        "configuration": {"returnImmediately": True, **extra},
    }
    task: dict[str, Any] = _rpc(http, "SendMessage", params)["result"]["task"]
    return task


# -- JSON-RPC 2.0 envelope -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "code", "call_id"),
    [
        (b"{not json", -32700, None),
        (b"[]", -32600, None),
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}]', -32600, None),
        (b'"GetTask"', -32600, None),
        (b'{"jsonrpc": "1.0", "id": 7, "method": "GetTask", "params": {}}', -32600, 7),
        (b'{"id": "a", "method": "GetTask", "params": {}}', -32600, "a"),
        (b'{"jsonrpc": "2.0", "id": "b", "params": {}}', -32600, "b"),
        (b'{"jsonrpc": "2.0", "id": 3, "method": 42}', -32600, 3),
        (b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "GetTask"}', -32600, None),
        (b'{"jsonrpc": "2.0", "id": true, "method": "GetTask"}', -32600, None),
        (b'{"jsonrpc": "2.0", "id": 4, "method": "NoSuchMethod"}', -32601, 4),
        (b'{"jsonrpc": "2.0", "id": 5, "method": "GetTask", "params": [1]}', -32602, 5),
        (b'{"jsonrpc": "2.0", "id": 6, "method": "GetTask", "params": {"id": "nope"}}', -32001, 6),
        # the card declares no extended card: UnsupportedOperation (the spec's CORE-CAP-003)
        (b'{"jsonrpc": "2.0", "id": 8, "method": "GetExtendedAgentCard"}', -32004, 8),
    ],
)
def test_each_json_rpc_violation_gets_its_code_and_the_request_id(
    http: httpx.Client, body: bytes, code: int, call_id: Any
) -> None:
    answer = http.post("/a2a", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["jsonrpc"] == "2.0"
    assert answer.json()["id"] == call_id
    assert answer.json()["error"]["code"] == code, answer.json()


def test_a_version_not_served_is_32009_on_json_rpc_and_400_on_rest(http: httpx.Client) -> None:
    refused = _rpc(http, "GetTask", {"id": "x-1"}, **{"A2A-Version": "2.0"})
    assert refused["error"]["code"] == -32009
    rest = http.get("/a2a/tasks/x-1", headers={"A2A-Version": "2.0"})
    assert rest.status_code == 400
    assert rest.json()["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    assert _rpc(http, "GetTask", {"id": "x-1"})["error"]["code"] == -32001  # 1.0 is served
    for patch in ("1.0.1", "1"):  # patch numbers are not negotiated
        served = _rpc(http, "GetTask", {"id": "x-1"}, **{"A2A-Version": patch})
        assert served["error"]["code"] == -32001, patch
        assert http.get("/a2a/tasks/x-1", headers={"A2A-Version": patch}).status_code == 404
    for other in ("1.1", "0.3", "2", "x"):
        assert _rpc(http, "GetTask", {"id": "x-1"}, **{"A2A-Version": other})["error"]["code"] == (
            -32009
        ), other


# -- declined messages, tasks, lists --------------------------------------------------------


def test_a_declined_message_is_a_rejected_task_every_follow_up_reads(http: httpx.Client) -> None:
    task = _decline(http)
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    why = task["status"]["message"]["parts"]
    assert "no registered agent offers the capability" in why[0]["text"]
    assert why[1]["data"]["code"] == "no_capability"
    assert "candidates" in why[1]["data"]
    read = _rpc(http, "GetTask", {"id": task["id"]})["result"]
    assert read["status"]["state"] == "TASK_STATE_REJECTED"
    assert read["history"][0]["parts"] == [{"text": "please"}]
    listed = _rpc(http, "ListTasks", {})["result"]
    assert [t["id"] for t in listed["tasks"]] == [task["id"]]
    cancel = _rpc(http, "CancelTask", {"id": task["id"]})
    assert cancel["error"]["code"] == -32002
    old = http.post(
        "/a2a",
        json={"jsonrpc": "2.0", "id": 9, "method": "tasks/get", "params": {"id": task["id"]}},
    ).json()["result"]
    assert (old["kind"], old["status"]["state"]) == ("task", "rejected")


def test_text_that_fits_no_skill_is_rejected_with_the_routes_candidates(
    http: httpx.Client,
) -> None:
    message = {"messageId": "m-text", "role": "ROLE_USER", "parts": [{"text": "zzqx wibble"}]}
    task = _rpc(http, "SendMessage", {"message": message})["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    data = task["status"]["message"]["parts"][1]["data"]
    assert data["code"] in ("no_match", "no_capability")
    assert isinstance(data["candidates"], list)


def test_a_rejection_lists_candidates_with_their_match_confidence_and_the_threshold(
    http: httpx.Client, dead_port: int
) -> None:
    for agent_id, tag, examples in (
        ("refund-1", "refund.issue", ["I want my money back", "refund my order"]),
        ("ship-1", "parcel.track", ["where is my parcel", "track my package"]),
    ):
        body = {
            "id": agent_id,
            "capabilities": [tag],
            "examples": examples,
            "transport": {"endpoint": f"http://127.0.0.1:{dead_port}/invoke"},
        }
        assert http.post("/v1/agents", json=body).status_code == 201
    text = "book me a flight to Mars"
    # both cards fitted by every matcher first: a refit between the route and the send
    # (the embedding matcher finishing) would weigh the text anew
    route: dict[str, Any] = wait_until(
        lambda: (
            (r := http.post("/v1/route", json={"text": text}).json())["text"]["pending"] == [] and r
        ),
        "the router to fit both cards",
    )
    assert route["agent_id"] is None, route
    message = {"messageId": "m-mars", "role": "ROLE_USER", "parts": [{"text": text}]}

    task = _rpc(http, "SendMessage", {"message": message})["result"]["task"]

    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    text_part, data_part = task["status"]["message"]["parts"]
    data = data_part["data"]
    confidences = {c["capability"]: c["factors"]["match"] for c in route["candidates"]}
    assert data["candidates"] == [
        {"capability": tag, "confidence": confidence} for tag, confidence in confidences.items()
    ]  # each capability once, with what the refusal weighed: never an instance's score
    statements = [t["statement"] for t in route["thresholds"]]
    assert data["thresholds"] == statements
    assert statements[0].startswith("best confidence") and " < " in statements[0]
    assert statements[0] in text_part["text"]


def test_list_tasks_filters_and_pages_with_tokens_and_a_total(http: httpx.Client) -> None:
    a = [_decline(http, "ctx-a")["id"] for _ in range(3)]
    b = [_decline(http, "ctx-b")["id"] for _ in range(2)]
    seen: list[str] = []
    token = ""
    while True:
        page = _rpc(http, "ListTasks", {"pageSize": 2, **({"pageToken": token} if token else {})})
        result = page["result"]
        assert result["totalSize"] == 5
        assert result["pageSize"] == len(result["tasks"]) <= 2
        seen += [t["id"] for t in result["tasks"]]
        token = result["nextPageToken"]
        if not token:
            break
    assert seen == list(reversed(a + b))  # newest first, each once
    only_b = _rpc(http, "ListTasks", {"contextId": "ctx-b"})["result"]
    assert (only_b["totalSize"], {t["id"] for t in only_b["tasks"]}) == (2, set(b))
    rejected = _rpc(http, "ListTasks", {"status": "TASK_STATE_REJECTED"})["result"]
    assert rejected["totalSize"] == 5
    assert _rpc(http, "ListTasks", {"status": "TASK_STATE_COMPLETED"})["result"]["totalSize"] == 0
    assert "history" not in only_b["tasks"][0]
    with_history = _rpc(http, "ListTasks", {"contextId": "ctx-b", "historyLength": 1})["result"]
    assert len(with_history["tasks"][0]["history"]) == 1
    past, future = "2000-01-01T00:00:00Z", "2999-01-01T00:00:00+00:00"
    assert _rpc(http, "ListTasks", {"statusTimestampAfter": past})["result"]["totalSize"] == 5
    assert _rpc(http, "ListTasks", {"statusTimestampAfter": future})["result"]["totalSize"] == 0
    for size in (0, -1, 101, "ten"):
        assert _rpc(http, "ListTasks", {"pageSize": size})["error"]["code"] == -32602, size
        assert http.get("/a2a/tasks", params={"pageSize": size}).status_code == 400, size
    assert _rpc(http, "ListTasks", {"pageToken": "not-ours"})["error"]["code"] == -32602


def test_cancel_answers_task_not_found_or_not_cancelable(
    http: httpx.Client, gated: GatedAgent
) -> None:
    assert _rpc(http, "CancelTask", {"id": "no-such-task"})["error"]["code"] == -32001
    task = _async_send(http, "long-1")
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
    wait_until(lambda: gated.calls == 1, "the task to reach the agent")
    working = _rpc(http, "CancelTask", {"id": task["id"]})
    assert working["error"]["code"] == -32002
    assert working["error"]["data"][0]["reason"] == "TASK_NOT_CANCELABLE"
    assert _data(working["error"])["state"] == "TASK_STATE_WORKING"
    gated.gate.set()
    wait_until(
        lambda: (
            _rpc(http, "GetTask", {"id": task["id"]})["result"]["status"]["state"]
            == "TASK_STATE_COMPLETED"
        ),
        "the task to complete",
    )
    ended = _rpc(http, "CancelTask", {"id": task["id"]})
    assert (ended["error"]["code"], _data(ended["error"])["state"]) == (
        -32002,
        "TASK_STATE_COMPLETED",
    )
    assert gated.calls == 1


def test_list_tasks_puts_the_most_recently_updated_first(
    http: httpx.Client, gated: GatedAgent
) -> None:
    older = _async_send(http, "long-2")
    wait_until(lambda: gated.calls == 1, "the task to reach the agent")
    newer = _decline(http)
    assert [t["id"] for t in _rpc(http, "ListTasks", {})["result"]["tasks"]] == [
        newer["id"],
        older["id"],
    ]
    gated.gate.set()
    wait_until(
        lambda: (
            _rpc(http, "GetTask", {"id": older["id"]})["result"]["status"]["state"]
            == "TASK_STATE_COMPLETED"
        ),
        "the older task to complete",
    )
    listed = _rpc(http, "ListTasks", {"pageSize": 1})["result"]
    assert [t["id"] for t in listed["tasks"]] == [older["id"]]  # updated last: first
    rest = _rpc(http, "ListTasks", {"pageSize": 1, "pageToken": listed["nextPageToken"]})
    assert [t["id"] for t in rest["result"]["tasks"]] == [newer["id"]]


def test_a_context_continues_and_a_known_task_takes_no_second_message(
    http: httpx.Client,
) -> None:
    first = _decline(http, "talk-1")
    again = _decline(http, "talk-1")
    listed = _rpc(http, "ListTasks", {"contextId": "talk-1"})["result"]
    assert {t["id"] for t in listed["tasks"]} == {first["id"], again["id"]}
    follow = {
        "messageId": "follow-1",
        "role": "ROLE_USER",
        "taskId": first["id"],
        "contextId": "talk-1",
        "parts": [{"text": "and then?"}],
    }
    refused = _rpc(http, "SendMessage", {"message": follow})
    assert refused["error"]["code"] == -32004
    assert _data(refused["error"])["state"] == "TASK_STATE_REJECTED"
    unknown = _rpc(http, "SendMessage", {"message": {**follow, "taskId": "never-made"}})
    assert unknown["error"]["code"] == -32001
    assert "history" not in _rpc(http, "GetTask", {"id": first["id"], "historyLength": 0})["result"]
    one = _rpc(http, "GetTask", {"id": first["id"], "historyLength": 1})["result"]
    assert len(one["history"]) == 1
    assert one["history"][0]["contextId"] == "talk-1"


def test_the_card_is_public_at_each_path_and_names_both_bindings(
    http: httpx.Client, coordinator: str
) -> None:
    paths = (
        "/.well-known/agent-card.json",
        "/.well-known/agent.json",
        "/a2a",
        "/a2a/.well-known/agent-card.json",  # where a client given the endpoint looks
    )
    cards = [http.get(p).json() for p in paths]
    assert cards[0] == cards[1] == cards[2] == cards[3]
    bindings = {
        (i["protocolBinding"], i["protocolVersion"]) for i in cards[0]["supportedInterfaces"]
    }
    assert {("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("JSONRPC", "0.3")} <= bindings
    assert all(i["url"] == f"{coordinator}/a2a" for i in cards[0]["supportedInterfaces"])
    assert cards[0]["capabilities"]["pushNotifications"] is True


# -- the official client on both bindings ------------------------------------------


@pytest.fixture(params=["HTTP+JSON", "JSONRPC"])
async def sdk_client(coordinator: str, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """The official client, made from the card, on one binding."""
    async with httpx.AsyncClient(timeout=10) as http:
        config = ClientConfig(httpx_client=http, supported_protocol_bindings=[request.param])
        client = await create_client(coordinator, client_config=config)
        yield client
        await client.close()


def _message(text: str, **metadata: str) -> Message:
    message = Message(message_id=secrets.token_hex(8), role=Role.ROLE_USER)
    message.parts.append(new_text_part(text))
    message.metadata.update(metadata)
    return message


@pytest.fixture
def echo_agent(http: httpx.Client) -> Iterator[None]:
    async def invoke(request: Request) -> JSONResponse:
        body = await request.json()
        return JSONResponse({"text": f"echo: {body.get('text')}"})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    app = Starlette(routes=[Route("/invoke", invoke, methods=["POST"]), Route("/health", health)])
    with ServerThread(app) as server:
        registered = http.post(
            "/v1/agents",
            json={
                "id": "echo-1",
                "capabilities": ["echo.say"],
                "transport": {"type": "http", "endpoint": f"{server.url}/invoke"},
            },
        )
        assert registered.status_code == 201
        yield


async def test_the_official_client_sends_gets_lists_and_cancels(
    sdk_client: Any, echo_agent: None
) -> None:
    replies = [
        e
        async for e in sdk_client.send_message(
            SendMessageRequest(message=_message("hi", capability="echo.say"))
        )
    ]
    answered = replies[-1].task
    assert answered.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_text_parts(answered.artifacts[0].parts) == ["echo: hi"]
    declined = _message("hi", capability="no.such.skill")
    events = [e async for e in sdk_client.send_message(SendMessageRequest(message=declined))]
    task = events[0].task
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert get_data_parts(task.status.message.parts)[0]["code"] == "no_capability"
    read = await sdk_client.get_task(GetTaskRequest(id=task.id, history_length=1))
    assert read.status.state == TaskState.TASK_STATE_REJECTED
    assert len(read.history) == 1
    listed = await sdk_client.list_tasks(ListTasksRequest(page_size=10))
    assert [t.id for t in listed.tasks] == [task.id, answered.id]  # newest first
    assert listed.total_size == 2
    done = await sdk_client.get_task(GetTaskRequest(id=answered.id))
    assert get_text_parts(done.artifacts[0].parts) == ["echo: hi"]
    with pytest.raises(TaskNotCancelableError) as refused:
        await sdk_client.cancel_task(CancelTaskRequest(id=task.id))
    assert refused.value.data["state"] == "TASK_STATE_REJECTED"  # read from the ErrorInfo
    with pytest.raises(TaskNotFoundError):
        await sdk_client.get_task(GetTaskRequest(id="never-made"))
    follow = _message("more")
    follow.task_id = task.id
    with pytest.raises(UnsupportedOperationError):
        [e async for e in sdk_client.send_message(SendMessageRequest(message=follow))]


async def test_a_completed_task_takes_no_message_and_its_context_goes_on(
    sdk_client: Any, echo_agent: None
) -> None:
    first = _message("hi", capability="echo.say")
    first.context_id = "chat-1"
    done = [e async for e in sdk_client.send_message(SendMessageRequest(message=first))][-1].task
    assert (done.status.state, done.context_id) == (TaskState.TASK_STATE_COMPLETED, "chat-1")
    again = _message("and again", capability="echo.say")
    again.task_id = done.id
    with pytest.raises(UnsupportedOperationError) as refused:  # the spec's CORE-SEND-002
        [e async for e in sdk_client.send_message(SendMessageRequest(message=again))]
    assert refused.value.data["state"] == "TASK_STATE_COMPLETED"
    follow = _message("and again", capability="echo.say")
    follow.context_id = done.context_id
    follow.reference_task_ids.append(done.id)
    [e async for e in sdk_client.send_message(SendMessageRequest(message=follow))]
    chat = await sdk_client.list_tasks(ListTasksRequest(context_id="chat-1", history_length=1))
    assert len(chat.tasks) == 2 and chat.tasks[1].id == done.id
    assert list(chat.tasks[0].history[0].reference_task_ids) == [done.id]


@pytest.mark.parametrize(
    "part",
    [
        {"raw": "dGNr", "mediaType": "application/x-unsupported-tck-type"},
        {"url": "https://files.example/a.pdf", "mediaType": "application/pdf"},
        {"kind": "file", "file": {"bytes": "dGNr", "mimeType": "image/png"}},  # v0.3
        {"kind": "file", "file": "not an object"},
    ],
)
def test_a_file_part_is_refused_as_a_content_type_not_supported(
    http: httpx.Client, echo_agent: None, part: dict[str, Any]
) -> None:
    message = {
        "messageId": secrets.token_hex(8),
        "role": "ROLE_USER",
        "parts": [{"text": "see attached"}, part],
        "metadata": {"capability": "echo.say"},
    }
    refused = _rpc(http, "SendMessage", {"message": message})["error"]
    assert refused["code"] == -32005, refused
    assert refused["data"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
    rest = http.post("/a2a/message:send", json={"message": message}, headers=V1)
    assert rest.status_code == 415  # the spec's mapping (section 5.4)
    assert rest.json()["error"]["details"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
    assert _rpc(http, "ListTasks", {})["result"]["tasks"] == []  # nothing was delivered


def test_the_rest_binding_takes_and_answers_a2a_json(http: httpx.Client, echo_agent: None) -> None:
    a2a_json = {**V1, "content-type": "application/a2a+json"}
    message = {
        "messageId": "rest-a2a-json",
        "role": "ROLE_USER",
        "parts": [{"text": "typed"}],
        "metadata": {"capability": "echo.say"},
    }
    sent = http.post(
        "/a2a/message:send", content=orjson.dumps({"message": message}), headers=a2a_json
    )
    assert sent.status_code == 200, sent.text
    assert sent.headers["content-type"] == "application/a2a+json"
    task = sent.json()["task"]
    assert task["artifacts"][0]["parts"][0] == {"text": "echo: typed"}
    read = http.get(f"/a2a/tasks/{task['id']}", headers={**V1, "accept": "application/a2a+json"})
    assert read.headers["content-type"] == "application/a2a+json"
    assert read.json()["status"]["state"] == "TASK_STATE_COMPLETED"
    missing = http.get("/a2a/tasks/never-made", headers=V1)
    assert (missing.status_code, missing.headers["content-type"]) == (404, "application/a2a+json")
    [info] = missing.json()["error"]["details"]
    assert (info["@type"], info["reason"]) == (
        "type.googleapis.com/google.rpc.ErrorInfo",
        "TASK_NOT_FOUND",
    )


async def test_the_official_client_streams(sdk_client: Any, echo_agent: None) -> None:
    events = [
        e
        async for e in sdk_client.send_message(
            SendMessageRequest(message=_message("streamed", capability="echo.say"))
        )
    ]
    assert events  # the client asks for a stream when the card offers it
    tasks = [e.task for e in events if e.HasField("task")]
    assert [t.status.state for t in tasks] == [TaskState.TASK_STATE_COMPLETED]
    assert get_text_parts(tasks[0].artifacts[0].parts) == ["echo: streamed"]


def test_with_keys_on_the_card_is_public_everywhere_and_the_rest_binding_asks_for_a_key() -> None:
    admin = secrets.token_urlsafe(24)
    settings = Settings(auth="on", admin_key=SecretStr(admin), decision_log="off")
    with run_coordinator(settings) as (url, _), httpx.Client(base_url=url, timeout=10) as http:
        for path in ("/.well-known/agent-card.json", "/.well-known/agent.json", "/a2a"):
            card = http.get(path)
            assert card.status_code == 200, (path, card.text)
            assert "bearer" in card.json()["securitySchemes"]
        anonymous = http.get("/a2a/tasks")
        assert anonymous.status_code == 401
        assert anonymous.json()["error"]["status"] == "UNAUTHENTICATED"
        keyed = http.get("/a2a/tasks", headers={"authorization": f"Bearer {admin}"})
        assert keyed.status_code == 200
        assert keyed.json() == {"tasks": [], "nextPageToken": "", "pageSize": 0, "totalSize": 0}


async def test_the_official_clients_v03_transport_reaches_the_v03_interface(
    coordinator: str,
) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        raw = (await http.get(f"{coordinator}/.well-known/agent-card.json")).json()
        card = ParseDict(raw, AgentCard(), ignore_unknown_fields=True)
        v03 = [i for i in card.supported_interfaces if i.protocol_version == "0.3"]
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(v03)  # the client then speaks message/send, tasks/get
        client = await create_client(card, client_config=ClientConfig(httpx_client=http))
        sent = [
            e
            async for e in client.send_message(
                SendMessageRequest(message=_message("hi", capability="no.such.skill"))
            )
        ]
        assert sent[0].task.status.state == TaskState.TASK_STATE_REJECTED
        read = await client.get_task(GetTaskRequest(id=sent[0].task.id))
        assert read.status.state == TaskState.TASK_STATE_REJECTED
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=read.id))
        await client.close()
