"""`ReachClient` and `SyncReachClient` against a real coordinator and a real agent.

Most tests run once per client through `call(method, ...)`, which calls the same
method on either client, so both are held to the same answers and errors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent_reach import (
    Agent,
    AgentRequest,
    NoCapability,
    NoInstance,
    NotFound,
    ReachClient,
    ReachError,
    Settings,
    SyncReachClient,
)
from agent_reach.clock import ManualClock
from agent_reach.testing.servers import ServerThread, run_coordinator

Call = Callable[..., Any]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def coordinator(clock: ManualClock) -> Iterator[str]:
    """A coordinator on a manual clock, with `stock-01` serving `inventory.check`."""
    with run_coordinator(Settings(), clock) as (url, _):
        agent = Agent("stock-01", ["inventory.check"], coordinator_url=url, display_name="库存查询")

        @agent.handler
        async def check(request: AgentRequest) -> dict[str, Any]:
            return {"sku": request.payload["sku"], "quantity": 42}

        server = ServerThread(agent.app)
        agent.endpoint_url = f"{server.url}/invoke"
        with server:  # registered once started: the agent's startup registers it
            yield url


@pytest.fixture(params=["ReachClient", "SyncReachClient"])
def call(request: pytest.FixtureRequest, coordinator: str) -> Iterator[Call]:
    if request.param == "SyncReachClient":
        with SyncReachClient(coordinator) as sync_client:
            yield lambda method, *args, **kwargs: getattr(sync_client, method)(*args, **kwargs)
        return

    async def once(method: str, *args: Any, **kwargs: Any) -> Any:
        async with ReachClient(coordinator) as async_client:
            return await getattr(async_client, method)(*args, **kwargs)

    yield lambda method, *args, **kwargs: asyncio.run(once(method, *args, **kwargs))


def test_invoke_returns_the_agent_answer_with_route_and_attempts(call: Call) -> None:
    answer = call("invoke", "inventory.check", payload={"sku": "AIR2-WHT"}, request_id="cli-1")

    assert (answer.request_id, answer.status, answer.agent_id) == ("cli-1", "ok", "stock-01")
    assert answer.result == {"sku": "AIR2-WHT", "quantity": 42}
    assert len(answer.trace_id) == 32
    assert (answer.route.rule, answer.route.agent_id) == ("exact", "stock-01")
    assert [(a.agent_id, a.outcome) for a in answer.attempts] == [("stock-01", "ok")]


def test_route_explains_the_choice(call: Call) -> None:
    decision = call("route", "inventory.check")

    assert (decision.capability, decision.agent_id, decision.rule) == (
        "inventory.check",
        "stock-01",
        "exact",
    )
    [candidate] = decision.candidates
    assert candidate.agent_id == "stock-01"
    assert set(decision.weights) <= set(candidate.factors)
    assert decision.policy_version


def test_agents_and_capabilities_list_the_live_instance(call: Call) -> None:
    [view] = call("agents")

    assert (view.id, view.display_name, view.capabilities, view.status) == (
        "stock-01",
        "库存查询",
        ["inventory.check"],
        "healthy",
    )
    assert call("capabilities") == {"inventory.check": ["stock-01"]}


def test_register_heartbeat_and_deregister(call: Call, coordinator: str) -> None:
    spec = {
        "id": "manual-01",
        "capabilities": ["manual.cap"],
        "transport": {"type": "http", "endpoint": "http://127.0.0.1:9/invoke"},
        "ttl": 30,
    }
    view = call("register", spec)
    assert (view.id, view.capabilities) == ("manual-01", ["manual.cap"])
    assert call("heartbeat", "manual-01") == 30

    call("deregister", "manual-01")

    with pytest.raises(NotFound) as unknown:
        call("heartbeat", "manual-01")
    assert (unknown.value.status, unknown.value.code) == (404, "unknown_agent")


def test_unknown_capability_raises_no_capability(call: Call) -> None:
    with pytest.raises(NoCapability) as missing:
        call("invoke", "no.such.capability", payload={})

    assert (missing.value.status, missing.value.code) == (404, "no_capability")
    assert len(missing.value.details["trace_id"]) == 32


def test_capability_without_a_live_instance_raises_no_instance(
    call: Call, clock: ManualClock
) -> None:
    call(
        "register",
        {
            "id": "lapsed-01",
            "capabilities": ["lapsed.cap"],
            "transport": {"type": "http", "endpoint": "http://127.0.0.1:9/invoke"},
            "ttl": 1,
        },
    )
    clock.advance(2)  # the lease ran out and nothing renewed it

    with pytest.raises(NoInstance) as none_live:
        call("invoke", "lapsed.cap", payload={}, suspend=False)

    assert (none_live.value.status, none_live.value.code) == (503, "no_instance")
    assert none_live.value.retryable


def test_unreachable_coordinator_raises_reach_error(dead_port: int) -> None:
    with (
        SyncReachClient(f"http://127.0.0.1:{dead_port}") as sync_client,
        pytest.raises(ReachError) as unreachable,
    ):
        sync_client.agents()

    assert unreachable.value.code == "coordinator_unreachable"


async def test_async_client_serves_concurrent_calls_on_one_pool(coordinator: str) -> None:
    async with ReachClient(coordinator) as client:
        answers = await asyncio.gather(
            *(client.invoke("inventory.check", payload={"sku": f"SKU-{n}"}) for n in range(8))
        )

    assert [a.result["sku"] for a in answers] == [f"SKU-{n}" for n in range(8)]
    assert len({a.request_id for a in answers}) == 8


def test_submit_and_wait_task_return_the_finished_result(call: Call) -> None:
    task = call("submit", "inventory.check", payload={"sku": "X5-BLUE"}, request_id="job-1")
    assert (task.task_id, task.status) == ("job-1", "queued")

    result = call("wait_task", "job-1", 10.0)

    assert (result.request_id, result.agent_id) == ("job-1", "stock-01")
    assert result.result == {"sku": "X5-BLUE", "quantity": 42}


def test_invoke_stops_waiting_on_a_suspended_request_with_task_pending(
    call: Call, clock: ManualClock
) -> None:
    call(
        "register",
        {
            "id": "gone-01",
            "capabilities": ["gone.cap"],
            "transport": {"type": "http", "endpoint": "http://127.0.0.1:9/invoke"},
        },
    )
    with pytest.raises(ReachError) as pending:
        call("invoke", "gone.cap", payload={}, request_id="parked-1", wait_s=0.2)
    assert pending.value.code == "task_pending"  # suspended: nobody could take it yet
    assert call("task", "parked-1").status == "suspended"
