"""A service that answers server-sent events, behind a sidecar (`stream: true`), through a
real coordinator: each event reaches the caller as the service sends it.

The services are the streaming peers of `test_streaming.py` (Starlette on uvicorn, Node's
`http`): every event after the first waits for a gate the test opens only after it has
read the first one, so "before the end" never rests on timing. The services' ledgers
count executions.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from peers.sse_agents import invoke_stream, ledger_of, open_gate, sse_events
from sidecar_kit import running_sidecar

from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_until

CAPABILITY = "chat.sidecar"


@pytest.fixture
def coordinator(sse_agent: str) -> Iterator[str]:
    """A coordinator with the service's sidecar registered."""
    with run_coordinator(Settings(decision_log="off")) as (url, _):
        config = {
            "coordinator": url,
            "agent": {"id": "sse-sidecar"},
            "service": {"url": sse_agent, "health_url": f"{sse_agent}/health"},
            "capabilities": [
                {
                    "capability": CAPABILITY,
                    "stream": True,
                    "path": "/invoke",
                    "body": {"request_id": "{{ request_id }}", "payload": "{{ payload }}"},
                }
            ],
        }
        with running_sidecar(config) as (sidecar, _):
            wait_until(lambda: sidecar.agent.is_registered, "the sidecar to register")
            yield url


def _body(request_id: str, **payload: Any) -> dict[str, Any]:
    return {"capability": CAPABILITY, "request_id": request_id, "payload": payload or None}


def test_each_event_reaches_the_caller_as_the_service_sends_it(
    coordinator: str, sse_agent: str
) -> None:
    request_id = f"sc-{uuid.uuid4().hex}"
    with invoke_stream(coordinator, _body(request_id)) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response.iter_lines())
        assert next(events) == {"event": "token", "id": "1", "data": "first"}
        # the service is still waiting at its gate: the event came before the end
        open_gate(sse_agent, request_id)
        rest = list(events)
    assert [(e["event"], e["data"], e.get("id")) for e in rest[:2]] == [
        ("token", "second", "2"),
        ("token", "third", "3"),
    ]
    answer = json.loads(rest[-1]["data"])
    assert rest[-1]["event"] == "reach.end" and answer["status"] == "ok"
    assert answer["agent_id"] == "sse-sidecar"
    assert answer["result"]["text"] == "firstsecondthird"
    assert ledger_of(sse_agent)["executions"].count(request_id) == 1


def test_a_caller_that_does_not_ask_for_a_stream_gets_the_events_whole(
    coordinator: str, sse_agent: str
) -> None:
    request_id = f"sc-whole-{uuid.uuid4().hex}"
    open_gate(sse_agent, request_id)  # nobody waits
    answer = httpx.post(f"{coordinator}/v1/invoke", json=_body(request_id), timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["text"] == "firstsecondthird"
    assert [e["data"] for e in answer.json()["result"]["events"]] == ["first", "second", "third"]
    assert ledger_of(sse_agent)["executions"].count(request_id) == 1


def test_a_service_answering_json_is_mapped_as_a_plain_call(
    coordinator: str, sse_agent: str
) -> None:
    request_id = f"sc-plain-{uuid.uuid4().hex}"
    answer = httpx.post(
        f"{coordinator}/v1/invoke", json=_body(request_id, plain=True, words=["a"]), timeout=30
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"] == {"words": ["a"]}
    assert ledger_of(sse_agent)["executions"].count(request_id) == 1


def test_a_stream_that_breaks_off_ends_as_broken_and_is_not_resent(
    coordinator: str, sse_agent: str
) -> None:
    request_id = f"sc-break-{uuid.uuid4().hex}"
    with invoke_stream(coordinator, _body(request_id, **{"break": True})) as response:
        events = list(sse_events(response.iter_lines()))
    assert events[0]["data"] == "first"
    assert events[-1]["event"] == "reach.error"
    assert json.loads(events[-1]["data"])["error"]["code"] == "agent_stream_broken"
    assert ledger_of(sse_agent)["executions"].count(request_id) == 1


def test_a_caller_leaving_mid_stream_closes_the_services_stream(
    coordinator: str, sse_agent: str
) -> None:
    request_id = f"sc-gone-{uuid.uuid4().hex}"
    with invoke_stream(coordinator, _body(request_id)) as response:
        assert next(sse_events(response.iter_lines()))["data"] == "first"
    wait_until(
        lambda: request_id in ledger_of(sse_agent)["disconnected"],
        "the service saw its stream closed",
    )
    assert ledger_of(sse_agent)["executions"].count(request_id) == 1
