"""Streamed answers through `POST /v1/invoke`: agents on Starlette and on Node's `http`
that answer `text/event-stream`, callers on httpx and urllib reading as it arrives.

Every "before the end" claim rests on a gate the agent waits on and the test opens only
after it has read the first event: nothing here depends on timing.
"""

from __future__ import annotations

import json
import socket
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from peers.sse_agents import invoke_stream, ledger_of, open_gate, sse_events

from agent_reach.config import Settings
from agent_reach.errors import NoCapability
from agent_reach.sdk.client import ReachClient, SyncReachClient
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_until

CAPABILITY = "chat.stream"
STREAM = {"accept": "text/event-stream"}


@pytest.fixture
def memory_coordinator() -> Iterator[str]:
    with run_coordinator(Settings(decision_log="off")) as (url, _):
        yield url


def _register(base: str, sse_agent: str) -> None:
    answer = httpx.post(
        f"{base}/v1/agents",
        json={
            "id": "streamer",
            "capabilities": [CAPABILITY],
            "description": "streams its answer token by token",
            "transport": {"type": "http", "endpoint": f"{sse_agent}/invoke"},
        },
    )
    assert answer.status_code == 201, answer.text


def _body(request_id: str, **payload: Any) -> dict[str, Any]:
    return {"capability": CAPABILITY, "request_id": request_id, "payload": payload or None}


def test_first_event_reaches_an_httpx_caller_before_the_stream_ends(
    coordinator: str, sse_agent: str
) -> None:
    _register(coordinator, sse_agent)
    request_id = f"stream-{uuid.uuid4().hex}"
    with invoke_stream(coordinator, _body(request_id)) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["transfer-encoding"] == "chunked"
        events = sse_events(response.iter_lines())
        first = next(events)
        assert first == {"event": "token", "id": "1", "data": "first"}
        assert request_id not in ledger_of(sse_agent)["disconnected"]
        open_gate(sse_agent, request_id)  # only now may the agent send the rest
        rest = list(events)
    assert [e["data"] for e in rest[:2]] == ["second", "third"]
    last = rest[-1]
    assert last["event"] == "reach.end"
    answer = json.loads(last["data"])
    assert answer["status"] == "ok"
    assert answer["request_id"] == request_id
    assert answer["normalized"] == "sse"
    assert answer["result"]["text"] == "firstsecondthird"
    assert [a["outcome"] for a in answer["attempts"]] == ["ok"]
    assert ledger_of(sse_agent)["executions"].count(request_id) == 1
    trace = httpx.get(f"{coordinator}/v1/traces/{answer['trace_id']}").json()
    assert [s["status"] for s in trace["spans"] if s["kind"] == "attempt"] == ["ok"]
    stats = httpx.get(f"{coordinator}/v1/agents").json()["agents"][0]["stats"]
    assert (stats["calls"], stats["success_rate"], stats["in_flight"]) == (1, 1.0, 0)
    # the stored answer replays the assembled stream; the agent is not called again
    replay = httpx.post(f"{coordinator}/v1/invoke", json=_body(request_id), timeout=30)
    assert replay.json()["result"]["text"] == "firstsecondthird"
    assert ledger_of(sse_agent)["executions"].count(request_id) == 1


def test_first_event_reaches_a_urllib_caller_reading_chunks(
    memory_coordinator: str, sse_agent: str
) -> None:
    _register(memory_coordinator, sse_agent)
    request_id = f"stream-{uuid.uuid4().hex}"
    request = urllib.request.Request(  # noqa: S310 - a loopback http URL
        f"{memory_coordinator}/v1/invoke",
        data=json.dumps(_body(request_id)).encode(),
        headers={"content-type": "application/json", **STREAM},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        seen = b""
        while b"\n\n" not in seen:
            seen += response.read1(65536)
        assert b"data: first\n\n" in seen
        assert b"second" not in seen
        open_gate(sse_agent, request_id)
        seen += response.read()
    assert seen.index(b"data: second") < seen.index(b"event: reach.end")
    assert ledger_of(sse_agent)["executions"].count(request_id) == 1


def test_a_caller_that_does_not_ask_gets_the_assembled_answer(
    memory_coordinator: str, sse_agent: str
) -> None:
    _register(memory_coordinator, sse_agent)
    request_id = f"whole-{uuid.uuid4().hex}"
    open_gate(sse_agent, request_id)  # the agent streams without waiting
    answer = httpx.post(f"{memory_coordinator}/v1/invoke", json=_body(request_id), timeout=30)
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert document["normalized"] == "sse"
    assert document["result"] == {
        "text": "firstsecondthird",
        "events": [
            {"event": "token", "data": "first", "id": "1"},
            {"event": "token", "data": "second", "id": "2"},
            {"event": "token", "data": "third", "id": "3"},
        ],
    }


def test_an_agent_that_does_not_stream_is_one_last_event(
    memory_coordinator: str, sse_agent: str
) -> None:
    _register(memory_coordinator, sse_agent)
    request_id = f"plain-{uuid.uuid4().hex}"
    with httpx.stream(
        "POST",
        f"{memory_coordinator}/v1/invoke",
        json=_body(request_id, plain=True),
        headers=STREAM,
        timeout=30,
    ) as response:
        events = list(sse_events(response.iter_lines()))
    assert [e["event"] for e in events] == ["reach.end"]
    assert json.loads(events[0]["data"])["result"] == {"words": ["first", "second", "third"]}


def test_an_http10_caller_gets_the_stream_delimited_by_the_close(
    memory_coordinator: str, sse_agent: str
) -> None:
    _register(memory_coordinator, sse_agent)
    body = json.dumps(_body(f"old-{uuid.uuid4().hex}", plain=True)).encode()
    host, port = memory_coordinator.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(
            b"POST /v1/invoke HTTP/1.0\r\ncontent-type: application/json\r\n"
            b"accept: text/event-stream\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, events = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert b"transfer-encoding" not in head.lower()
    assert events.startswith(b"event: reach.end\ndata: {") and events.endswith(b"}\n\n")


def test_the_deadline_cuts_the_stream_with_a_last_error_event_and_no_resend(
    coordinator: str, sse_agent: str
) -> None:
    _register(coordinator, sse_agent)
    request_id = f"late-{uuid.uuid4().hex}"
    with httpx.stream(
        "POST",
        f"{coordinator}/v1/invoke",
        json={**_body(request_id), "timeout_class": "reasoning"},  # one re-send allowed
        headers={**STREAM, "x-reach-deadline-ms": "700"},
        timeout=30,
    ) as response:
        events = list(sse_events(response.iter_lines()))  # the gate is never opened
    assert [e["event"] for e in events] == ["token", "reach.error"]
    error = json.loads(events[-1]["data"])["error"]
    assert error["code"] == "deadline_exceeded"
    assert error["outcome_unknown"] is True
    assert [a["outcome"] for a in error["attempts"]] == ["deadline_exceeded"]
    wait_until(lambda: request_id in ledger_of(sse_agent)["disconnected"], "the agent saw the cut")
    assert ledger_of(sse_agent)["executions"].count(request_id) == 1
    trace = httpx.get(f"{coordinator}/v1/traces/{error['trace_id']}").json()
    statuses = {s["kind"]: s["status"] for s in trace["spans"]}
    assert statuses["attempt"] == "deadline_exceeded"
    stats = httpx.get(f"{coordinator}/v1/agents").json()["agents"][0]["stats"]
    assert (stats["calls"], stats["success_rate"], stats["in_flight"]) == (1, 0.0, 0)
    why = httpx.get(f"{coordinator}/v1/requests/{request_id}/why")
    assert why.status_code == 200, why.text
    assert "deadline_exceeded" in why.text


def test_a_stream_that_breaks_off_ends_with_an_error_event_and_is_not_resent(
    memory_coordinator: str, sse_agent: str
) -> None:
    _register(memory_coordinator, sse_agent)
    request_id = f"broken-{uuid.uuid4().hex}"
    with httpx.stream(
        "POST",
        f"{memory_coordinator}/v1/invoke",
        json={**_body(request_id, **{"break": True}), "timeout_class": "reasoning"},
        headers=STREAM,
        timeout=30,
    ) as response:
        events = list(sse_events(response.iter_lines()))
    assert [e["event"] for e in events] == ["token", "reach.error"]  # never half an event
    error = json.loads(events[-1]["data"])["error"]
    assert error["code"] == "agent_stream_broken"
    assert [a["outcome"] for a in error["attempts"]] == ["agent_stream_broken"]
    assert ledger_of(sse_agent)["executions"].count(request_id) == 1


def test_a_caller_leaving_mid_stream_closes_the_agents_stream(
    memory_coordinator: str, sse_agent: str
) -> None:
    _register(memory_coordinator, sse_agent)
    request_id = f"gone-{uuid.uuid4().hex}"
    with invoke_stream(memory_coordinator, _body(request_id)) as response:
        trace_id = response.headers["x-trace-id"]
        assert next(sse_events(response.iter_lines()))["data"] == "first"
        # leaving the block closed the connection mid-stream, the gate still shut
    wait_until(
        lambda: request_id in ledger_of(sse_agent)["disconnected"],
        "the agent saw its stream closed",
    )
    assert ledger_of(sse_agent)["executions"].count(request_id) == 1

    def attempts() -> list[str]:
        trace = httpx.get(f"{memory_coordinator}/v1/traces/{trace_id}").json()
        return [s["status"] for s in trace.get("spans", []) if s["kind"] == "attempt"]

    assert wait_until(attempts, "the stream's end was recorded") == ["caller_disconnected"]


async def test_the_sdk_streams_events_then_the_whole_answer(
    memory_coordinator: str, sse_agent: str
) -> None:
    _register(memory_coordinator, sse_agent)
    request_id = f"sdk-{uuid.uuid4().hex}"
    async with ReachClient(memory_coordinator) as client:
        events = client.invoke_stream(CAPABILITY, request_id=request_id)
        first = await anext(events)
        assert (first.event, first.data, first.id) == ("token", "first", "1")
        async with httpx.AsyncClient() as http:
            assert (await http.post(f"{sse_agent}/gate/{request_id}")).status_code == 200
        rest = [event async for event in events]
        assert [e.data for e in rest[:-1]] == ["second", "third"]
        answer = rest[-1].answer
        assert answer is not None and answer.status == "ok"
        assert answer.result["text"] == "firstsecondthird"


def test_a_duplicate_waits_for_the_stream_to_end_and_gets_its_answer(
    coordinator: str, sse_agent: str
) -> None:
    _register(coordinator, sse_agent)
    request_id = f"twice-{uuid.uuid4().hex}"
    with (
        httpx.Client(timeout=30) as client,
        client.stream(
            "POST", f"{coordinator}/v1/invoke", json=_body(request_id), headers=STREAM
        ) as response,
        ThreadPoolExecutor(1) as pool,
    ):
        events = sse_events(response.iter_lines())
        assert next(events)["data"] == "first"
        duplicate = pool.submit(
            httpx.post, f"{coordinator}/v1/invoke", json=_body(request_id), timeout=30
        )
        open_gate(sse_agent, request_id)
        assert json.loads(list(events)[-1]["data"])["status"] == "ok"
        again = duplicate.result()
    assert again.status_code == 200, again.text
    assert again.json()["result"]["text"] == "firstsecondthird"
    assert ledger_of(sse_agent)["executions"].count(request_id) == 1


def test_a_stream_holds_its_admission_slot_until_it_ends(sse_agent: str) -> None:
    with run_coordinator(Settings(decision_log="off", max_in_flight=1)) as (url, _):
        _register(url, sse_agent)
        request_id = f"slot-{uuid.uuid4().hex}"
        with httpx.stream(
            "POST", f"{url}/v1/invoke", json=_body(request_id), headers=STREAM, timeout=30
        ) as response:
            events = sse_events(response.iter_lines())
            assert next(events)["data"] == "first"
            refused = httpx.post(f"{url}/v1/invoke", json=_body(f"other-{request_id}"))
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"]["code"] == "overloaded"
            open_gate(sse_agent, request_id)
            list(events)
        other = f"after-{request_id}"
        open_gate(sse_agent, other)
        assert httpx.post(f"{url}/v1/invoke", json=_body(other), timeout=30).status_code == 200


def test_the_blocking_sdk_streams_too_and_raises_refusals_by_class(
    memory_coordinator: str, sse_agent: str
) -> None:
    _register(memory_coordinator, sse_agent)
    request_id = f"sync-{uuid.uuid4().hex}"
    with SyncReachClient(memory_coordinator) as client:
        events = client.invoke_stream(CAPABILITY, request_id=request_id)
        assert next(events).data == "first"
        open_gate(sse_agent, request_id)
        rest = list(events)
        assert [e.event for e in rest] == ["token", "token", "reach.end"]
        assert rest[-1].answer is not None and rest[-1].answer.agent_id == "streamer"
        with pytest.raises(NoCapability):
            list(client.invoke_stream("no.such.capability"))
