"""A delegated request parked behind the kill switch keeps its chain's promises.

The story: a customer-service agent hands a refund on to `refund-01` while an admin has
disabled it. The delegated request is parked; its 202 says the agent is disabled, by
whom and when. Enabled within the chain's deadline, it is replayed once, with a fresh
token for the time the chain has left; past the deadline it ends `delegation_expired`
and the refund never runs; never an earlier refund's answer from memory. SDK agents on
127.0.0.1, the refund agent verifying every token with the coordinator's public keys;
on memory and Redis.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_reach import Agent, AgentRequest, DelegationVerifier, Settings
from agent_reach.invoke.tasks import ENTRY, TaskEntry
from agent_reach.model.invocations import InvokeRequest
from agent_reach.model.keys import ANONYMOUS, Chain, Link
from agent_reach.sdk.client import TaskPending
from agent_reach.server.app import CoordinatorApp, create_app
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, stop_all
from agent_reach.testing.waiting import wait_until

# `chat`: the caller waits up to 6 s for the customer-service agent (its chain's
# deadline); `brief`: 1.5 s. Parked requests would wait a minute.
POLICY = """
[[access.delegate]]
principals = ["domain:cs"]
capabilities = ["refund.*"]

[timeout_classes.chat]
timeout_s = 6.0

[timeout_classes.brief]
timeout_s = 1.5

[delivery]
suspend_s = 60
"""


@dataclass
class World:
    http: httpx.Client
    server: ServerThread
    executed: list[tuple[str, float, float]] = field(default_factory=list)  # id, exp, at


@pytest.fixture
def world(settings: Settings, tmp_path: Path) -> Iterator[World]:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    with (
        ServerThread(create_app(settings.model_copy(update={"policy_file": policy}))) as server,
        httpx.Client(base_url=server.url, timeout=15) as http,
    ):
        world = World(http, server)
        agents = _agents(world)
        try:
            wait_until(lambda: len(http.get("/v1/agents").json()["agents"]) == 2, "2 agents")
            yield world
        finally:
            stop_all(agents)


def _agents(world: World) -> list[ServerThread]:
    url = world.server.url
    bot = Agent("cs-bot", ["cs.chat"], coordinator_url=url, domain="cs")
    refund = Agent("refund-01", ["refund.issue"], coordinator_url=url, domain="cs", delegation=True)
    verifier = DelegationVerifier(url)

    @bot.handler
    async def chat(request: AgentRequest) -> dict[str, Any]:
        try:
            handed = await request.delegate("refund.issue", payload=request.payload, wait_s=0)
        except TaskPending as exc:
            return {"parked": exc.task.model_dump()}
        return {"refund": handed.result}

    @refund.handler
    async def issue(request: AgentRequest) -> dict[str, Any]:
        assert request.delegation is not None
        seen = await verifier.verify(request.delegation["token"])  # refuses an expired one
        world.executed.append((request.request_id, seen.expires_at, time.time()))
        return {"refund": "accepted"}

    servers = []
    for agent in (bot, refund):
        server = ServerThread(agent.app)
        agent.endpoint_url = f"{server.url}/invoke"
        servers.append(server.start())
    return servers


def chat(world: World, order: str, timeout_class: str) -> dict[str, Any]:
    body = {"capability": "cs.chat", "payload": {"order": order}, "timeout_class": timeout_class}
    answer = world.http.post("/v1/invoke", json=body)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    return result


def ended(world: World, task_id: str, timeout_s: float = 10) -> dict[str, Any]:
    task: dict[str, Any] = wait_until(
        lambda: (t := world.http.get(f"/v1/tasks/{task_id}").json()).get("http_status") and t,
        "the parked refund to end",
        timeout_s=timeout_s,
    )
    return task


def runs_of(world: World, request_id: str) -> list[tuple[str, float, float]]:
    return [e for e in world.executed if e[0] == request_id]


def test_a_refund_parked_behind_the_kill_switch_runs_once_when_enabled_in_time(
    world: World,
) -> None:
    assert chat(world, "A0", "chat") == {"refund": {"refund": "accepted"}}  # an earlier one
    assert world.http.post("/v1/agents/refund-01/disable").status_code == 200

    parked = chat(world, "A1", "chat")["parked"]
    task_id = parked["task_id"]
    view = world.http.get(f"/v1/tasks/{task_id}").json()
    for shown in (parked, view):
        [instance] = shown["instances"]
        assert instance["agent_id"] == "refund-01"
        assert instance["disabled"]["by"] is not None and instance["disabled"]["at"] > 0
    assert world.http.post("/v1/agents/refund-01/enable").status_code == 200
    task = ended(world, task_id)

    assert (task["status"], task["answer"]["result"]) == ("ok", {"refund": "accepted"})
    [(_, expires_at, received_at)] = runs_of(world, task_id)  # once
    assert received_at < expires_at <= parked["suspended_until"]  # fresh, within the chain
    assert [a["agent_id"] for a in task["answer"]["attempts"]] == ["refund-01"]
    spans = world.http.get(f"/v1/traces/{task['trace_id']}").json()["spans"]
    assert [s["status"] for s in spans if s["kind"] == "task"] == ["ok"]


def test_a_refund_parked_past_its_chains_deadline_ends_delegation_expired(
    world: World,
) -> None:
    assert chat(world, "A0", "chat") == {"refund": {"refund": "accepted"}}  # remembered? no
    assert world.http.post("/v1/agents/refund-01/disable").status_code == 200

    parked = chat(world, "A1", "brief")["parked"]
    task = ended(world, parked["task_id"])  # well before the minute a parked request waits
    assert world.http.post("/v1/agents/refund-01/enable").status_code == 200

    error = task["answer"]["error"]
    assert (task["http_status"], error["code"]) == (504, "delegation_expired")
    assert runs_of(world, parked["task_id"]) == []
    assert parked["suspended_until"] - parked["created_at"] <= 1.5


def run_task(world: World, task: TaskEntry) -> Any:
    app = world.server.app
    assert isinstance(app, CoordinatorApp) and app.runtime is not None and world.server.loop
    running = asyncio.run_coroutine_threadsafe(app.runtime.invoke.run_task(task), world.server.loop)
    return running.result(timeout=15)


def delegated_task(world: World, task_id: str, left_s: float) -> TaskEntry:
    return delegated_task_of(task_id, left_s)


def delegated_task_of(task_id: str, left_s: float, budget: float | None = None) -> TaskEntry:
    """A refund handed on by cs-bot, as a parked entry holds it, with `left_s` left."""
    link = Link("anonymous", "cs", "agent", "cs-bot", "cs.chat")
    chain = Chain(
        caller=ANONYMOUS,
        links=(link,),
        root=task_id,
        scope=("refund.*",),
        context_id=None,
        hop=4,
        budget=budget,
        expires_at=time.time() + left_s,
    )
    return TaskEntry(
        task_id=task_id,
        request=InvokeRequest(capability="refund.fake", payload={"order": "B1"}),
        trace_id="0" * 32,
        hop_budget=4,
        deadline_ms=6000,  # what the chain had left when the request was parked
        principal=replace(ANONYMOUS, chain=chain),
    )


def test_a_replay_runs_within_what_its_chain_has_left_and_not_past_it(world: World) -> None:
    fake = FakeAgent()
    with ServerThread(fake) as server:
        body = {
            "id": "refund-fake",
            "capabilities": ["refund.fake"],
            "transport": {"endpoint": f"{server.url}/invoke"},
        }
        assert world.http.post("/v1/agents", json=body).status_code == 201

        late = run_task(world, delegated_task(world, "late-1", left_s=-0.5))
        run_task(world, delegated_task(world, "soon-1", left_s=1.0))

    assert (late.status, b"delegation_expired" in late.body) == (504, True)
    [delivered] = fake.received  # the late one was never sent
    assert delivered.body["request_id"] == "soon-1"
    assert int(delivered.headers["x-reach-deadline-ms"]) <= 1000  # not the 6 s it had


def test_a_parked_request_keeps_its_chain_through_the_queue() -> None:
    task = replace(
        delegated_task_of("kept-1", left_s=30, budget=4.0), expires_at=time.time() + 30
    )
    assert ENTRY.validate_json(ENTRY.dump_json(task)) == task


def test_a_replay_spends_from_its_chains_budget(world: World) -> None:
    fake = FakeAgent()
    with ServerThread(fake) as server:
        body = {
            "id": "refund-fake",
            "capabilities": ["refund.fake"],
            "transport": {"endpoint": f"{server.url}/invoke"},
            "cost": 5,
        }
        assert world.http.post("/v1/agents", json=body).status_code == 201

        answer = run_task(world, delegated_task_of("dear-1", left_s=5, budget=4.0))

    assert (answer.status, b"budget_exhausted" in answer.body) == (403, True)
    assert fake.received == []
