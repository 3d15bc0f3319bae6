"""`why` behind a load balancer: two coordinators on one Redis (standalone and Cluster).

Coordinator A answers the request; the agent, registered with B, reads its context
projection at B; `why` asked of either finds the whole walk: A's answer with A's view of
the instances, and the read made at B.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from agent_reach import Agent, AgentRequest
from agent_reach.cli import app
from agent_reach.config import Settings
from agent_reach.testing.servers import ServerThread, run_coordinator
from agent_reach.testing.waiting import wait_until


@pytest.fixture
def two(shared: Settings) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """A and B; A's deliveries name B as the context's URL, as a balancer in front
    of both would send an agent's context read to either."""
    with ExitStack() as stack:
        b_url, _ = stack.enter_context(
            run_coordinator(shared.model_copy(update={"node_id": "coord-b"}))
        )
        a_settings = shared.model_copy(update={"node_id": "coord-a", "public_url": b_url})
        a_url, _ = stack.enter_context(run_coordinator(a_settings))
        a = stack.enter_context(httpx.Client(base_url=a_url, timeout=10))
        b = stack.enter_context(httpx.Client(base_url=b_url, timeout=10))
        yield a, b


def walk(http: httpx.Client, request_id: str) -> dict[str, Any]:
    """The walk once it holds the context read (records are shared within a flush)."""

    def ready() -> dict[str, Any] | None:
        answer = http.get(f"/v1/requests/{request_id}/why")
        if answer.status_code != 200:
            assert answer.json()["error"]["code"] == "unknown_request", answer.text
            return None
        document: dict[str, Any] = answer.json()
        context = next(s for s in document["steps"] if s["step"] == "context")
        return document if context["reads"] else None

    return wait_until(ready, f"the walk of {request_id} with its context read", timeout_s=10)


def test_why_on_either_coordinator_walks_a_request_the_other_one_answered(two) -> None:
    a, b = two
    agent = Agent(
        "order-01", ["order.status"], coordinator_url=str(b.base_url), context_fields=["order"]
    )
    calls: list[str] = []

    @agent.handler
    async def status(request: AgentRequest) -> dict[str, Any]:
        calls.append(request.request_id)
        context = await request.context_data()  # read at B
        return {"order": context["order"]["id"]}

    server = ServerThread(agent.app)
    agent.endpoint_url = f"{server.url}/invoke"
    with server:
        wait_until(lambda: a.get("/v1/agents/order-01").status_code == 200, "registration at A")
        context = a.post("/v1/contexts", json={"document": {"order": {"id": "A-17"}}}).json()
        answer = a.post(
            "/v1/invoke",
            json={
                "capability": "order.status",
                "request_id": "why-shared-1",
                "context_id": context["context_id"],
            },
        )
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-reach-node"] == "coord-a"

        documents = {"a": walk(a, "why-shared-1"), "b": walk(b, "why-shared-1")}

    assert calls == ["why-shared-1"]  # walking it never runs it again
    for asked, document in documents.items():
        assert document["node"] == "coord-a", asked
        assert document["first_wrong_step"] is None, (asked, document["summary"])
        steps = {s["step"]: s for s in document["steps"]}
        assert steps["routing"]["decision"]["agent_id"] == "order-01"
        [instance] = steps["registry"]["instances"]
        assert instance["role"] == "chosen"
        assert instance["at_the_time"]["health"] == "healthy"
        assert instance["at_the_time"]["context_fields"] == ["order"]
        [read] = steps["context"]["reads"]
        assert read["values"] == {"order": {"id": "A-17"}}
        assert steps["delivery"]["result"] == {"order": "A-17"}
    cli = CliRunner().invoke(app, ["why", "why-shared-1", "--coordinator", str(b.base_url)])
    assert cli.exit_code == 0, cli.output
    assert "answered by coord-a" in " ".join(cli.output.split())  # however rich wraps it


def test_a_request_no_coordinator_answered_is_unknown_on_both(two) -> None:
    for http in two:
        answer = http.get("/v1/requests/never-sent-1/why")
        assert answer.status_code == 404
        assert answer.json()["error"]["code"] == "unknown_request"
        assert "any coordinator" in answer.json()["error"]["message"]
