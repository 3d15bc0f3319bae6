"""An SDK agent against a real coordinator: registration, lease, delivery, duplicates, hops.

Every agent runs under uvicorn on 127.0.0.1; a `Ledger` wrapped around its ASGI app
records each delivery exactly as it arrived on the wire.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import httpx
import orjson
import pytest

from agent_reach import Agent, AgentFailed, AgentRequest, HopLimit, Settings, SyncReachClient
from agent_reach.model.invocations import DEFAULT_MAX_HOP
from agent_reach.server.app import create_app
from agent_reach.testing.ports import refused_port
from agent_reach.testing.servers import ServerThread, run_coordinator

POLL_TIMEOUT_S = 10.0
POLL_INTERVAL_S = 0.02
SHORT_TTL_S = 3  # heartbeats every second: lease renewal is seen within a few seconds

T = TypeVar("T")


def wait_until(probe: Callable[[], T], what: str) -> T:
    """Poll `probe` until it returns something truthy; fail naming `what` at the deadline."""
    deadline = time.monotonic() + POLL_TIMEOUT_S
    while not (value := probe()):
        if time.monotonic() > deadline:
            pytest.fail(f"still waiting after {POLL_TIMEOUT_S:g} s for {what}")
        time.sleep(POLL_INTERVAL_S)
    return value


class Ledger:
    """ASGI wrapper: records each `/invoke` request's headers and raw body, then passes it on."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.deliveries: list[tuple[dict[str, str], bytes]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/invoke":
            await self.app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        self.deliveries.append(({k.decode(): v.decode() for k, v in scope["headers"]}, body))
        pending = [{"type": "http.request", "body": body, "more_body": False}]

        async def replay() -> dict[str, Any]:
            return pending.pop() if pending else await receive()

        await self.app(scope, replay, send)


def serving(agent: Agent, ledger: Ledger | None = None) -> ServerThread:
    """A server thread for `agent` (optionally behind `ledger`) with its endpoint set."""
    server = ServerThread(ledger or agent.app)
    agent.endpoint_url = f"{server.url}/invoke"
    return server


def delivery(request_id: str, capability: str, payload: Any) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "capability": capability,
        "payload": payload,
        "context": None,
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
        "hop": 4,
    }


@pytest.fixture
def coordinator() -> Iterator[str]:
    with run_coordinator() as (url, _):
        yield url


@pytest.fixture
def client(coordinator: str) -> Iterator[SyncReachClient]:
    with SyncReachClient(coordinator) as sync_client:
        yield sync_client


def listed(client: SyncReachClient, agent_id: str) -> Any:
    return next((view for view in client.agents() if view.id == agent_id), None)


def test_started_agent_is_registered_and_receives_the_exact_delivery(
    coordinator: str, client: SyncReachClient
) -> None:
    agent = Agent("echo-01", ["echo.say"], coordinator_url=coordinator, display_name="回声")
    seen: list[AgentRequest] = []

    @agent.handler
    async def echo(request: AgentRequest) -> dict[str, Any]:
        seen.append(request)
        return {"echo": request.payload}

    ledger = Ledger(agent.app)
    with serving(agent, ledger):
        view = listed(client, "echo-01")
        assert view is not None and view.capabilities == ["echo.say"]
        assert view.transport.endpoint == agent.endpoint_url
        answer = client.invoke("echo.say", payload={"q": "还有货吗"}, request_id="req-1")

    assert answer.result == {"echo": {"q": "还有货吗"}}
    [(headers, raw)] = ledger.deliveries
    hop = DEFAULT_MAX_HOP - 1
    assert orjson.loads(raw) == {
        "request_id": "req-1",
        "capability": "echo.say",
        "payload": {"q": "还有货吗"},
        "context": None,
        "trace_id": answer.trace_id,
        "hop": hop,
    }
    assert headers["x-request-id"] == "req-1"
    assert headers["x-reach-hop"] == str(hop)
    assert re.fullmatch(rf"00-{answer.trace_id}-[0-9a-f]{{16}}-01", headers["traceparent"])
    [request] = seen
    assert (request.request_id, request.capability, request.payload, request.context) == (
        "req-1",
        "echo.say",
        {"q": "还有货吗"},
        None,
    )
    assert (request.trace_id, request.hop) == (answer.trace_id, hop)


def test_agent_keeps_trying_until_the_coordinator_comes_up() -> None:
    # Refused until the coordinator below listens on it; no other process can take it.
    with refused_port(reuse_address=True) as port:
        url = f"http://127.0.0.1:{port}"
        agent = Agent("early-01", ["early.cap"], coordinator_url=url)
        agent.handler(lambda request: None)
        with serving(agent):
            assert not agent.is_registered
            with ServerThread(create_app(Settings()), port=port), SyncReachClient(url) as client:
                # The coordinator lists the agent before the agent has read the 201 answer.
                wait_until(
                    lambda: listed(client, "early-01") and agent.is_registered,
                    "early-01 to register once the coordinator is up",
                )


def test_heartbeats_renew_the_lease(coordinator: str, client: SyncReachClient) -> None:
    agent = Agent("beat-01", ["beat.cap"], coordinator_url=coordinator, ttl=SHORT_TTL_S)
    agent.handler(lambda request: None)
    lowest = float("inf")

    def lease_went_back_up() -> bool:
        nonlocal lowest
        lease = listed(client, "beat-01").lease_expires_in_s
        lowest = min(lowest, lease)
        return lease > lowest + 0.3

    with serving(agent):
        wait_until(lease_went_back_up, "a heartbeat to push lease_expires_in_s back up")
        assert listed(client, "beat-01").status == "healthy"


def test_agent_registers_again_when_the_coordinator_forgot_it(
    coordinator: str, client: SyncReachClient
) -> None:
    agent = Agent("phoenix-01", ["phoenix.cap"], coordinator_url=coordinator, ttl=SHORT_TTL_S)
    agent.handler(lambda request: None)
    with serving(agent):
        first = listed(client, "phoenix-01").registered_at
        client.deregister("phoenix-01")  # behind its back: its next heartbeat gets 404

        def registered_again() -> bool:
            view = listed(client, "phoenix-01")
            return view is not None and view.registered_at > first

        wait_until(registered_again, "phoenix-01 to register again after a 404 heartbeat")


def test_agent_deregisters_on_shutdown(coordinator: str, client: SyncReachClient) -> None:
    agent = Agent("brief-01", ["brief.cap"], coordinator_url=coordinator)
    agent.handler(lambda request: None)
    with serving(agent):
        assert listed(client, "brief-01") is not None
    assert client.agents() == []
    assert not agent.is_registered


def test_repeated_request_id_runs_the_handler_once(coordinator: str) -> None:
    agent = Agent("once-01", ["once.cap"], coordinator_url=coordinator)
    calls: Counter[str] = Counter()
    gate = threading.Event()

    @agent.handler
    def slow(request: AgentRequest) -> dict[str, Any]:  # sync: runs in a worker thread
        calls[request.request_id] += 1
        gate.wait(POLL_TIMEOUT_S)
        return {"runs": calls[request.request_id], "sku": request.payload["sku"]}

    ledger = Ledger(agent.app)
    body = delivery("dup-1", "once.cap", {"sku": "X5PRO-BLU-256"})
    with serving(agent, ledger) as server, ThreadPoolExecutor(2) as pool:
        endpoint = f"{server.url}/invoke"
        concurrent = [
            pool.submit(httpx.post, endpoint, json=body, timeout=POLL_TIMEOUT_S) for _ in range(2)
        ]
        wait_until(lambda: len(ledger.deliveries) == 2, "both duplicate deliveries to arrive")
        gate.set()
        later = httpx.post(endpoint, json=body)
        answers = [f.result() for f in concurrent] + [later]

    assert [a.status_code for a in answers] == [200, 200, 200]
    assert [a.json() for a in answers] == [{"runs": 1, "sku": "X5PRO-BLU-256"}] * 3
    assert calls == {"dup-1": 1}


def test_handler_exception_reaches_the_caller_as_502_agent_error(
    coordinator: str, client: SyncReachClient
) -> None:
    agent = Agent("broken-01", ["broken.cap"], coordinator_url=coordinator)
    runs = Counter[str]()

    @agent.handler
    async def fail(request: AgentRequest) -> None:
        runs[request.request_id] += 1
        raise RuntimeError("库存系统不可用")

    with serving(agent) as server:
        with pytest.raises(AgentFailed) as failed:
            client.invoke("broken.cap", payload={}, request_id="boom-1")
        direct = httpx.post(f"{server.url}/invoke", json=delivery("boom-1", "broken.cap", {}))

    assert (failed.value.status, failed.value.code) == (502, "agent_error")
    assert failed.value.details["agent_answer"]["error"]["code"] == "handler_error"
    assert direct.status_code == 500
    assert direct.json() == {"error": {"code": "handler_error", "message": "库存系统不可用"}}
    assert runs == {"boom-1": 2}  # a failed run is not remembered: a redelivery runs again


def test_agent_refuses_a_body_that_is_not_a_delivery_and_answers_health(coordinator: str) -> None:
    agent = Agent("strict-01", ["strict.cap"], coordinator_url=coordinator)
    agent.handler(lambda request: None)
    with serving(agent) as server:
        not_json = httpx.post(f"{server.url}/invoke", content=b"{nope")
        missing = httpx.post(f"{server.url}/invoke", json={"capability": "strict.cap"})
        health = httpx.get(f"{server.url}/health")

    for answer in (not_json, missing):
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == "invalid_delivery"
    assert health.status_code == 200


def chain(coordinator: str) -> tuple[Agent, Agent, Ledger]:
    """`chain.outer` calls `chain.inner` through `request.client`; the inner one is ledgered."""
    outer = Agent("outer-01", ["chain.outer"], coordinator_url=coordinator)
    inner = Agent("inner-01", ["chain.inner"], coordinator_url=coordinator)

    @outer.handler
    async def forward(request: AgentRequest) -> dict[str, Any]:
        try:
            onward = await request.client.invoke("chain.inner", payload=request.payload)
        except HopLimit as exc:
            return {"outer_hop": request.hop, "stopped": exc.code}
        return {"outer_hop": request.hop, "inner": onward.result, "inner_trace": onward.trace_id}

    @inner.handler
    async def answer(request: AgentRequest) -> dict[str, Any]:
        return {"hop": request.hop, "trace_id": request.trace_id}

    return outer, inner, Ledger(inner.app)


def test_onward_call_through_request_client_passes_a_decremented_hop(
    coordinator: str, client: SyncReachClient
) -> None:
    outer, inner, inner_ledger = chain(coordinator)
    with serving(outer), serving(inner, inner_ledger):
        answer = client.invoke("chain.outer", payload={"sku": "AIR2-WHT"})

    first_hop = DEFAULT_MAX_HOP - 1
    assert answer.result == {
        "outer_hop": first_hop,
        "inner": {"hop": first_hop - 1, "trace_id": answer.trace_id},
        "inner_trace": answer.trace_id,
    }
    [(headers, _)] = inner_ledger.deliveries
    assert headers["x-reach-hop"] == str(first_hop - 1)
    assert headers["traceparent"].split("-")[1] == answer.trace_id


def test_spent_hop_budget_stops_the_onward_call(coordinator: str, client: SyncReachClient) -> None:
    outer, inner, inner_ledger = chain(coordinator)
    with serving(outer), serving(inner, inner_ledger):
        answer = client.invoke("chain.outer", payload={}, max_hop=1)

    assert answer.result == {"outer_hop": 0, "stopped": "hop_limit"}
    assert inner_ledger.deliveries == []
