"""An SDK agent whose handler yields: its answer streamed through a real coordinator.

The handler waits on a gate the test opens only once it has seen the first event, so
"before the end" never rests on timing; the ledger counts how often the handler ran.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest

from agent_reach import Agent, AgentFailed, AgentRequest, StreamEvent, SyncReachClient
from agent_reach.testing.servers import ServerThread, run_coordinator
from agent_reach.testing.waiting import wait_until

GATE_TIMEOUT_S = 10.0  # a gate nobody opens ends the handler's wait, failing the test


@dataclass
class Ledger:
    """What the handler did: runs started, runs that ended, generators closed early."""

    runs: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)
    gates: dict[str, threading.Event] = field(default_factory=dict)

    def gate(self, request_id: str) -> threading.Event:
        return self.gates.setdefault(request_id, threading.Event())


@pytest.fixture
def coordinator() -> Iterator[str]:
    with run_coordinator() as (url, _):
        yield url


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture
def agent(coordinator: str, ledger: Ledger) -> Iterator[str]:
    """A streaming SDK agent for `story.tell`, registered; yields its /invoke URL."""
    agent = Agent("teller-01", ["story.tell"], coordinator_url=coordinator)

    @agent.handler
    async def tell(request: AgentRequest) -> AsyncIterator[Any]:
        ledger.runs.append(request.request_id)
        payload = request.payload or {}
        if payload.get("fail") == "at once":
            raise RuntimeError("no story today")
        try:
            yield "once"
            await asyncio.to_thread(ledger.gate(request.request_id).wait, GATE_TIMEOUT_S)
            if payload.get("fail") == "midway":
                raise RuntimeError("lost the thread")
            yield {"upon": 2}
            yield StreamEvent(event="token", data="a time", id="3")
            ledger.finished.append(request.request_id)
        except BaseException:
            ledger.closed.append(request.request_id)
            raise

    server = ServerThread(agent.app)
    agent.endpoint_url = f"{server.url}/invoke"
    with server:
        wait_until(lambda: agent.is_registered, "the agent to register")
        yield agent.endpoint_url


def _opened_after_first(ledger: Ledger, events: Iterator[StreamEvent]) -> list[StreamEvent]:
    first = next(events)
    assert (first.event, first.data) == ("message", "once")
    request_id = ledger.runs[-1]
    assert request_id not in ledger.finished  # the first event came before the end
    ledger.gate(request_id).set()
    return [first, *events]


def test_each_yield_reaches_a_streaming_caller_as_it_is_made(
    coordinator: str, agent: str, ledger: Ledger
) -> None:
    with SyncReachClient(coordinator) as client:
        events = _opened_after_first(ledger, iter(client.invoke_stream("story.tell")))
    assert [(e.event, e.data, e.id) for e in events[:3]] == [
        ("message", "once", None),
        ("message", '{"upon":2}', None),
        ("token", "a time", "3"),
    ]
    last = events[-1]
    assert last.event == "reach.end" and last.answer is not None
    assert last.answer.status == "ok" and last.answer.agent_id == "teller-01"
    assert len(ledger.runs) == 1 and ledger.finished == ledger.runs


def test_a_caller_that_does_not_ask_for_a_stream_gets_the_events_whole(
    coordinator: str, agent: str, ledger: Ledger
) -> None:
    request_id = f"whole-{uuid.uuid4().hex}"
    ledger.gate(request_id).set()  # nobody is there to see a first event
    with SyncReachClient(coordinator) as client:
        answer = client.invoke("story.tell", request_id=request_id)
    assert answer.normalized == "sse"
    assert [(e["event"], e["data"]) for e in answer.result["events"]] == [
        ("message", "once"),
        ("message", '{"upon":2}'),
        ("token", "a time"),
    ]
    assert ledger.runs == [request_id]


def test_a_handler_failing_before_its_first_event_fails_like_any_handler(
    coordinator: str, agent: str, ledger: Ledger
) -> None:
    with SyncReachClient(coordinator) as client, pytest.raises(AgentFailed) as failed:
        client.invoke("story.tell", payload={"fail": "at once"})
    assert (failed.value.status, failed.value.code) == (502, "agent_error")
    assert failed.value.details["agent_answer"] == {
        "error": {"code": "handler_error", "message": "no story today"}
    }
    assert len(ledger.runs) == 1  # handler_error is not retryable: never run again


def test_a_handler_failing_midway_ends_the_stream_as_broken_and_runs_once(
    coordinator: str, agent: str, ledger: Ledger
) -> None:
    with SyncReachClient(coordinator) as client:
        events = iter(client.invoke_stream("story.tell", payload={"fail": "midway"}))
        with pytest.raises(AgentFailed) as broken:
            _opened_after_first(ledger, events)
    assert broken.value.code == "agent_stream_broken"
    assert len(ledger.runs) == 1 and ledger.closed == ledger.runs


def test_a_repeated_delivery_waits_for_the_run_and_gets_all_its_events(
    agent: str, ledger: Ledger
) -> None:
    request_id = f"twice-{uuid.uuid4().hex}"
    delivery = {
        "request_id": request_id,
        "capability": "story.tell",
        "payload": None,
        "context": None,
        "trace_id": uuid.uuid4().hex,
        "hop": 4,
    }
    body = orjson.dumps(delivery)
    headers = {"content-type": "application/json"}
    with (
        httpx.Client(timeout=30) as http,
        http.stream("POST", agent, content=body, headers=headers) as first,
    ):
        assert first.status_code == 200, first.read()
        assert first.headers["content-type"].startswith("text/event-stream")
        chunks = first.iter_bytes()
        opening = next(chunks)
        assert opening == b"event: message\ndata: once\n\n"
        with httpx.Client(timeout=30) as other:
            repeat: dict[str, httpx.Response] = {}
            thread = threading.Thread(
                target=lambda: repeat.update(r=other.post(agent, content=body, headers=headers))
            )
            thread.start()
            ledger.gate(request_id).set()
            live = opening + b"".join(chunks)
            thread.join(GATE_TIMEOUT_S)
    assert repeat["r"].status_code == 200
    assert repeat["r"].headers["content-type"].startswith("text/event-stream")
    assert repeat["r"].content == live
    assert ledger.runs == [request_id]


def test_a_caller_leaving_mid_stream_closes_the_handlers_generator(
    coordinator: str, agent: str, ledger: Ledger
) -> None:
    with (
        SyncReachClient(coordinator) as client,
        closing(client.invoke_stream("story.tell")) as events,
    ):
        assert next(events).data == "once"
        request_id = ledger.runs[-1]
    # leaving the block closed the connection mid-stream, the gate still shut
    wait_until(lambda: request_id in ledger.closed, "the handler's generator to be closed")
    ledger.gate(request_id).set()
    assert ledger.finished == []
