"""A run whose queuing fails after its record was stored: the caller's resend runs it, once.

`POST /v1/workflows/run` stores the run, then queues it. When the store fails between
the two (the queue write lost on its way, or done and its reply lost), the caller gets
503 and sends again with the same request_id. That resend must run the run — not wait
for a run nobody queued — and never run it twice. The fault is injected at the seam,
in front of the backend's real queue store (memory, or a real Redis), and the agent
counts what it executed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import httpx
import pytest

from agent_reach.backends.protocols import QueueStore
from agent_reach.config import Settings
from agent_reach.errors import StoreUnavailable
from agent_reach.orchestration.board import RUNS
from agent_reach.server.app import CoordinatorApp
from agent_reach.testing.servers import run_coordinator

Fault = Literal["request lost", "reply lost"]
STEP = {"action": "order.query", "param": {"order_no": "888"}}
DEADLINE_S = 4.0  # how long a resend would wait for a run nobody queued


class FailingOnce:
    """The real queue store, but the first push of a run fails with `fault`."""

    def __init__(self, queues: QueueStore, fault: Fault) -> None:
        self._queues = queues
        self._fault: Fault | None = fault

    def __getattr__(self, name: str) -> object:
        return getattr(self._queues, name)

    async def push_once(self, queue: str, payload: bytes, once: str, ttl_s: float) -> bool:
        fault, self._fault = self._fault, None
        if queue != RUNS or fault is None:
            return await self._queues.push_once(queue, payload, once, ttl_s)
        if fault == "reply lost":
            await self._queues.push_once(queue, payload, once, ttl_s)
        raise StoreUnavailable("redis is unreachable (injected)")


@pytest.fixture
def served(settings: Settings) -> Iterator[tuple[str, CoordinatorApp]]:
    with run_coordinator(settings) as served:
        yield served


@pytest.fixture
def http(served: tuple[str, CoordinatorApp]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served[0], timeout=DEADLINE_S + 5) as client:
        yield client


@pytest.mark.parametrize("fault", ["request lost", "reply lost"])
def test_a_resend_runs_a_run_whose_queuing_failed_and_runs_it_once(
    served: tuple[str, CoordinatorApp],
    http: httpx.Client,
    fake_agents,
    register,
    fault: Fault,
) -> None:
    agent, endpoint = fake_agents(name="order", answer={"status": "shipped"})
    assert register("order-1", endpoint, "order.query").status_code == 201
    runtime = served[1].runtime
    assert runtime is not None
    board = runtime.orchestrator.board
    board.queues = FailingOnce(board.queues, fault)  # type: ignore[assignment]
    body = {"steps": [STEP], "request_id": "wf-queued-once", "deadline_s": DEADLINE_S}

    refused = http.post("/v1/workflows/run", json=body)
    resent = http.post("/v1/workflows/run", json=body)
    again = http.post("/v1/workflows/run", json=body)

    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "store_unavailable"
    assert resent.status_code == 200, resent.text
    assert resent.json()["status"] == "ok"
    assert resent.json()["result"] == {"0": {"status": "shipped"}}
    assert again.json()["status"] == "ok"
    executed = [r for r in agent.received if r.body]
    assert [r.body["request_id"] for r in executed] == ["wf-queued-once:0"]
