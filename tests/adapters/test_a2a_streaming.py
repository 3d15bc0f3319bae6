"""A2A streaming both ways: `SendStreamingMessage` / `message/stream` answered at `/a2a`
by streaming the routed agent, and used to reach A2A agents whose card says they stream.

Official a2a-sdk clients and servers; the agents wait on a gate the test opens only
after it has seen the first chunk, so "before the end" never rests on timing.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_text_parts, new_data_part, new_text_part
from a2a.types import GetTaskRequest, Message, Role, SendMessageRequest, TaskState
from peers.a2a_agents import StoryLedger, start_story_agent
from peers.sse_agents import python_sse_agent, sse_events

from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_until

STREAM = {"accept": "text/event-stream"}


@pytest.fixture
def hub() -> Iterator[str]:
    with run_coordinator(Settings(decision_log="off")) as (url, _):
        yield url


@pytest.fixture(params=["1.0", "0.3"])
def story_agent(request: pytest.FixtureRequest, hub: str) -> Iterator[StoryLedger]:
    server, ledger = start_story_agent(request.param)
    try:
        registered = httpx.post(
            f"{hub}/v1/agents",
            json={"id": "storyteller", "transport": {"type": "a2a", "endpoint": server.url}},
        )
        assert registered.status_code == 201, registered.text
        assert registered.json()["transport"]["a2a_streaming"] is True
        yield ledger
    finally:
        server.stop()


@pytest.fixture
def sse_agent(hub: str) -> Iterator[str]:
    with python_sse_agent() as url:
        registered = httpx.post(
            f"{hub}/v1/agents",
            json={
                "id": "streamer",
                "capabilities": ["chat.stream"],
                "transport": {"type": "http", "endpoint": f"{url}/invoke"},
            },
        )
        assert registered.status_code == 201, registered.text
        yield url


@pytest.fixture
async def a2a(hub: str) -> AsyncIterator[Any]:
    async with httpx.AsyncClient(timeout=30) as http:
        client = await create_client(hub, client_config=ClientConfig(httpx_client=http))
        yield client
        await client.close()


def _message(text: str, **metadata: str) -> Message:
    message = Message(message_id=secrets.token_hex(8), role=Role.ROLE_USER)
    message.parts.append(new_text_part(text))
    message.metadata.update(metadata)
    return message


def test_an_invoke_asking_for_a_stream_reaches_a_streaming_a2a_agent_by_its_stream_method(
    hub: str, story_agent: StoryLedger
) -> None:
    words = f"tell me a story {secrets.token_hex(4)}"
    body = {"capability": "story.tell", "text": words}
    with httpx.stream("POST", f"{hub}/v1/invoke", json=body, headers=STREAM, timeout=30) as r:
        assert r.status_code == 200
        events = sse_events(r.iter_lines())
        # A blocking send could not answer before the agent finished: this is its stream.
        assert next(events) == {"event": "artifact", "data": "once"}
        story_agent.open(words)
        rest = list(events)
    assert [e["data"] for e in rest[:-1]] == [" upon", " a time"]
    assert rest[-1]["event"] == "reach.end"
    answer = json.loads(rest[-1]["data"])
    assert answer["result"]["text"] == "once upon a time"
    assert story_agent.runs == [words]


def test_an_invoke_without_a_stream_gets_the_a2a_agents_whole_answer(
    hub: str, story_agent: StoryLedger
) -> None:
    words = f"a whole story {secrets.token_hex(4)}"
    story_agent.open(words)  # the agent tells it without waiting
    answer = httpx.post(
        f"{hub}/v1/invoke", json={"capability": "story.tell", "text": words}, timeout=30
    )
    assert answer.status_code == 200, answer.text
    # the task's artifact has three text parts: joined by lines, as in any A2A answer
    assert answer.json()["result"]["text"] == "once\n upon\n a time"
    assert story_agent.runs == [words]


async def test_the_a2a_face_streams_an_sse_agent_to_the_official_client(
    sse_agent: str, a2a: Any
) -> None:
    message = _message("go", capability="chat.stream")
    stream = a2a.send_message(SendMessageRequest(message=message))
    first = await anext(stream)
    assert first.HasField("task")
    assert first.task.status.state == TaskState.TASK_STATE_WORKING
    chunk = await anext(stream)
    assert get_text_parts(chunk.artifact_update.artifact.parts) == ["first"]
    assert not chunk.artifact_update.append
    assert chunk.artifact_update.task_id == first.task.id
    # the streamed Task can be read back while it runs ...
    running = await a2a.get_task(GetTaskRequest(id=first.task.id))
    assert running.status.state == TaskState.TASK_STATE_WORKING
    async with httpx.AsyncClient() as http:  # only now may the agent go on
        ledger = (await http.get(f"{sse_agent}/ledger")).json()
        assert len(ledger["executions"]) == 1
        await http.post(f"{sse_agent}/gate/{ledger['executions'][0]}")
    rest = [event async for event in stream]
    chunks = [get_text_parts(e.artifact_update.artifact.parts)[0] for e in rest[:-1]]
    assert chunks == ["second", "third"]
    assert all(e.artifact_update.append for e in rest[:-1])
    last = rest[-1].status_update
    assert last.status.state == TaskState.TASK_STATE_COMPLETED
    assert last.metadata["agent_id"] == "streamer"
    # ... and once it has ended, with the whole answer
    done = await a2a.get_task(GetTaskRequest(id=first.task.id))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    (artifact,) = done.artifacts
    assert "first" in get_text_parts(artifact.parts)[0]
    async with httpx.AsyncClient() as http:
        assert len((await http.get(f"{sse_agent}/ledger")).json()["executions"]) == 1


async def test_the_official_client_streams_through_the_coordinator_from_an_a2a_agent(
    story_agent: StoryLedger, a2a: Any
) -> None:
    words = f"stream it {secrets.token_hex(4)}"
    stream = a2a.send_message(SendMessageRequest(message=_message(words, capability="story")))
    assert (await anext(stream)).HasField("task")
    chunk = await anext(stream)
    assert get_text_parts(chunk.artifact_update.artifact.parts) == ["once"]
    story_agent.open(words)
    rest = [event async for event in stream]
    text = "".join(get_text_parts(e.artifact_update.artifact.parts)[0] for e in rest[:-1])
    assert text == " upon a time"
    assert rest[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert story_agent.runs == [words]


def test_v03_message_stream_at_the_face(hub: str, sse_agent: str) -> None:
    call = {
        "jsonrpc": "2.0",
        "id": "c-1",
        "method": "message/stream",
        "params": {
            "message": {
                "kind": "message",
                "messageId": secrets.token_hex(8),
                "role": "user",
                "parts": [{"kind": "text", "text": "go"}],
                "metadata": {"capability": "chat.stream"},
            }
        },
    }
    with httpx.stream("POST", f"{hub}/a2a", json=call, timeout=30) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response.iter_lines())
        kinds = [json.loads(next(events)["data"])["result"]["kind"] for _ in range(2)]
        assert kinds == ["task", "artifact-update"]
        request_id = httpx.get(f"{sse_agent}/ledger").json()["executions"][0]
        httpx.post(f"{sse_agent}/gate/{request_id}")
        rest = [json.loads(e["data"]) for e in events]
    assert all(r["id"] == "c-1" for r in rest)
    final = rest[-1]["result"]
    assert final["kind"] == "status-update"
    assert final["final"] is True
    assert final["status"]["state"] == "completed"


async def test_a_stream_that_breaks_off_ends_as_a_failed_task_at_the_face(
    sse_agent: str, a2a: Any
) -> None:
    message = _message("go", capability="chat.stream")
    message.parts.append(new_data_part({"break": True}))
    events = [event async for event in a2a.send_message(SendMessageRequest(message=message))]
    assert get_text_parts(events[1].artifact_update.artifact.parts) == ["first"]
    last = events[-1].status_update
    assert last.status.state == TaskState.TASK_STATE_FAILED
    assert "broke off" in get_text_parts(last.status.message.parts)[0]
    async with httpx.AsyncClient() as http:
        assert len((await http.get(f"{sse_agent}/ledger")).json()["executions"]) == 1


def test_a_caller_leaving_the_face_mid_stream_closes_the_agents_stream(
    hub: str, sse_agent: str
) -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "SendStreamingMessage",
        "params": {
            "message": {
                "messageId": secrets.token_hex(8),
                "role": "ROLE_USER",
                "parts": [{"text": "go"}],
                "metadata": {"capability": "chat.stream"},
            }
        },
    }
    trace_id = secrets.token_hex(16)
    headers = {"a2a-version": "1.0", "traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"}
    with (
        httpx.Client(timeout=30) as client,
        client.stream("POST", f"{hub}/a2a", json=call, headers=headers) as r,
    ):
        events = sse_events(r.iter_lines())
        assert "artifactUpdate" in json.loads([next(events) for _ in range(2)][1]["data"])["result"]
    # the connection closed with the agent's gate still shut
    ledger = wait_until(
        lambda: (seen := httpx.get(f"{sse_agent}/ledger").json())["disconnected"] and seen,
        "the agent to see its stream closed",
    )
    assert ledger["disconnected"] == ledger["executions"]

    def attempts() -> list[str]:
        spans = httpx.get(f"{hub}/v1/traces/{trace_id}").json().get("spans", [])
        return [s["status"] for s in spans if s["kind"] == "attempt"]

    # closed because the caller left, not by the deadline that would have cut it later
    assert wait_until(attempts, "the stream's end to be recorded") == ["caller_disconnected"]
