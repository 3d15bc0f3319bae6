"""The chain is visible, and what agents report it cost is spent: real agents on loopback.

caller (shop-frontend) -> cs-bot (cs.answer, an SDK agent of cs-agents) -> `work.do`,
served by a plain HTTP agent that declares `cost: 1` and reports `X-Reach-Cost` on its
answers. Traces, decisions and `why` show the delegated hop on behalf of the caller
through cs-bot: the caller sees all of it, cs-agents its own hop down, others nothing.
On memory with one coordinator, and on Redis with two (the caller on one, the agents on
the other: traces and decisions are each coordinator's own, `why` is shared).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from rich.console import Console
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agent_reach import Agent, AgentRequest, ReachError, Settings, SyncReachClient
from agent_reach.cli.why_view import why_report
from agent_reach.testing.servers import ServerThread, run_coordinator
from agent_reach.testing.waiting import wait_until

ADMIN = "mesh-chain-admin-key-0123456789abcdef"
POLICY = """
[[access.delegate]]
principals = ["name:cs-agents"]
capabilities = ["work.*"]
"""
VIA = [{"agent": "cs-agents", "instance": "cs-bot", "capability": "cs.answer"}]


@dataclass
class World:
    backend: str
    caller_url: str
    agents_url: str
    keys: dict[str, str] = field(default_factory=dict)
    worked: list[dict[str, Any]] = field(default_factory=list)

    def client(self, principal: str, url: str | None = None) -> httpx.Client:
        auth = {"authorization": f"Bearer {self.keys[principal]}"}
        return httpx.Client(base_url=url or self.caller_url, headers=auth, timeout=30)

    def ask(self, payload: dict[str, Any], **options: Any) -> dict[str, Any]:
        with self.client("shop-frontend") as caller:
            body = {"capability": "cs.answer", "payload": payload, **options}
            answer = caller.post("/v1/invoke", json=body)
        assert answer.status_code == 200, answer.text
        document: dict[str, Any] = answer.json()
        return document


def _pricey() -> Starlette:
    """`work.do`: reports `X-Reach-Cost` when its payload gives `report`."""

    async def work(request: Request) -> Response:
        delivery = orjson.loads(await request.body())
        report = (delivery.get("payload") or {}).get("report")
        headers = {} if report is None else {"x-reach-cost": str(report)}
        body = orjson.dumps({"done": delivery["request_id"]})
        return Response(body, media_type="application/json", headers=headers)

    async def health(request: Request) -> Response:
        return Response(b'{"status":"ok"}', media_type="application/json")

    return Starlette(routes=[Route("/invoke", work, methods=["POST"]), Route("/health", health)])


def _handed_on(world: World) -> Any:
    """cs-bot: hands `work.do` on `times` times; reports each outcome."""

    async def answer(request: AgentRequest) -> dict[str, Any]:
        payload = request.payload or {}
        hops: list[dict[str, Any]] = []
        for _ in range(payload.get("times", 1)):
            try:
                handed = await request.delegate("work.do", payload=payload.get("work", {}))
            except ReachError as exc:
                hops.append({"refused": exc.code})
                continue
            hops.append(
                {
                    "request_id": handed.request_id,
                    "trace_id": handed.trace_id,
                    "costs": [a.cost for a in handed.attempts],
                }
            )
        return {"hops": hops}

    return answer


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    options: dict[str, Any] = {"auth": "on", "admin_key": ADMIN, "policy_file": policy}
    if request.param == "redis":
        options.update(
            registry_backend="redis",
            redis_url=request.getfixturevalue("redis_url"),
            redis_prefix=request.getfixturevalue("redis_prefix"),
        )
    with run_coordinator(Settings(**options)) as (first, _):
        if request.param == "memory":
            yield from _world(World("memory", first, first))
            return
        with run_coordinator(Settings(**options)) as (second, _):
            yield from _world(World("redis", first, second))


def _world(world: World) -> Iterator[World]:
    auth = {"authorization": f"Bearer {ADMIN}"}
    with httpx.Client(base_url=world.caller_url, headers=auth, timeout=10) as admin:
        for principal, role, grants in (
            ("shop-frontend", "caller", ["cs.*", "work.*"]),
            ("someone-else", "caller", ["cs.*", "work.*"]),
            ("cs-agents", "agent", ["cs.*"]),
            ("work-agents", "agent", ["work.*"]),
        ):
            body = {"principal": principal, "role": role, "capabilities": grants}
            world.keys[principal] = admin.post("/v1/keys", json=body).json()["key"]
        pricey = ServerThread(_pricey()).start()
        bot = Agent(
            "cs-bot",
            ["cs.answer"],
            coordinator_url=world.agents_url,
            api_key=world.keys["cs-agents"],
        )
        bot.handler(_handed_on(world))
        server = ServerThread(bot.app)
        bot.endpoint_url = f"{server.url}/invoke"
        server.start()
        try:
            with world.client("work-agents", world.agents_url) as owner:
                spec = {
                    "id": "pricey",
                    "capabilities": ["work.do"],
                    "transport": {"type": "http", "endpoint": f"{pricey.url}/invoke"},
                    "cost": 1,
                }
                assert owner.post("/v1/agents", json=spec).status_code == 201
            with SyncReachClient(world.caller_url, api_key=ADMIN) as client:
                wait_until(lambda: len(client.agents()) == 2, "cs-bot and pricey")
            yield world
        finally:
            server.stop()
            pricey.stop()


def test_reported_costs_are_spent_from_the_chains_budget(world: World) -> None:
    # Declared 1 a call, reported 6: 1 + 5, then 7 + 5 = 12 > 10, and the third is refused.
    reported = world.ask({"times": 3, "work": {"report": 6}}, budget=10)["result"]["hops"]
    assert [h.get("costs") for h in reported[:2]] == [[6.0], [6.0]]
    assert reported[2] == {"refused": "budget_exhausted"}
    # Without a report only the declared cost counts: 3 of 10.
    declared = world.ask({"times": 3}, budget=10)["result"]["hops"]
    assert [h.get("costs") for h in declared] == [[None], [None], [None]]
    # A report over the whole budget at once: the work is done, nothing more is handed on.
    spent = world.ask({"times": 2, "work": {"report": 50}}, budget=10)["result"]["hops"]
    assert spent[0]["costs"] == [50.0] and spent[1] == {"refused": "budget_exhausted"}


def _trace(world: World, principal: str, trace_id: str) -> dict[str, Any] | None:
    with world.client(principal, world.agents_url) as client:
        answer = client.get(f"/v1/traces/{trace_id}")
    return answer.json() if answer.status_code == 200 else None


def test_the_trace_shows_the_chain_to_the_caller_and_the_agent_its_own_hop(world: World) -> None:
    hop = world.ask({"work": {"report": 2}})["result"]["hops"][0]
    trace = _trace(world, "shop-frontend", hop["trace_id"])
    assert trace is not None
    [delegated] = [s for s in trace["spans"] if s["kind"] == "invoke" and s["name"] == "work.do"]
    assert (delegated["on_behalf_of"], delegated["via"]) == ("shop-frontend", ["cs-bot"])
    assert delegated["principal"] == "shop-frontend"  # the caller's record
    [attempt] = [
        s
        for s in trace["spans"]
        if s["parent_id"] == delegated["span_id"] and s["kind"] == "attempt"
    ]
    assert (attempt["agent_id"], attempt["cost"]) == ("pricey", 2.0)
    if world.backend == "memory":  # the caller's own invoke is kept where it was answered
        assert any(s["name"] == "cs.answer" and s["kind"] == "invoke" for s in trace["spans"])
    # cs-agents sees the call its token made and what is under it, not the caller's hop.
    agent_view = _trace(world, "cs-agents", hop["trace_id"])
    assert agent_view is not None
    names = {(s["kind"], s["name"]) for s in agent_view["spans"]}
    assert ("invoke", "work.do") in names and ("attempt", "work.do") in names
    assert ("invoke", "cs.answer") not in names
    assert _trace(world, "someone-else", hop["trace_id"]) is None
    with world.client("cs-agents", world.agents_url) as agent:
        listed = agent.get("/v1/traces").json()["traces"]
    assert hop["trace_id"] in {t["trace_id"] for t in listed}


def _why(world: World, principal: str, request_id: str) -> httpx.Response:
    with world.client(principal) as client:
        return client.get(f"/v1/requests/{request_id}/why")


def _shared_why(world: World, principal: str, request_id: str) -> httpx.Response:
    """`why` once the record is readable here: on Redis another coordinator's answer is
    shared within the shared journal's flush (0.25 s), not at once."""

    def answered() -> httpx.Response | None:
        answer = _why(world, principal, request_id)
        return answer if answer.status_code != 404 else None

    return wait_until(answered, f"the record of {request_id} to be shared")


def test_why_shows_on_whose_behalf_and_through_whom(world: World) -> None:
    asked = world.ask({"work": {"report": 3}})
    hop = asked["result"]["hops"][0]
    # on Redis: the other coordinator's record
    answer = _shared_why(world, "shop-frontend", hop["request_id"])
    assert answer.status_code == 200, answer.text
    walked = answer.json()
    assert walked["delegation"] == {"on_behalf_of": "shop-frontend", "via": VIA, "by": "cs-agents"}
    assert _why(world, "cs-agents", hop["request_id"]).status_code == 200  # its own hop
    assert _why(world, "someone-else", hop["request_id"]).status_code == 404
    assert _why(world, "cs-agents", asked["request_id"]).status_code == 404  # above its hop
    root = _shared_why(world, "shop-frontend", asked["request_id"]).json()
    assert root["delegation"] is None
    if world.backend == "memory":  # the hops under it, from this coordinator's trace
        [handed] = root["handed_on"]
        assert handed["request_id"] == hop["request_id"]
        assert (handed["on_behalf_of"], handed["via"], handed["status"]) == (
            "shop-frontend",
            ["cs-bot"],
            "ok",
        )
        assert handed["attempts"] == [{"agent_id": "pricey", "outcome": "ok", "cost": 3.0}]
    # `agent-reach why` prints the chain
    out = io.StringIO()
    Console(file=out, width=200).print(why_report(walked))
    assert "delegated: shop-frontend → cs-bot (cs-agents), on behalf of shop-frontend" in (
        out.getvalue()
    )
    if world.backend == "memory":
        out = io.StringIO()
        Console(file=out, width=200).print(why_report(root))
        assert f"handed on: shop-frontend → cs-bot → work.do ({hop['request_id']}): ok" in (
            out.getvalue()
        )


def test_decisions_name_the_chain_and_its_agents_see_them(world: World) -> None:
    hop = world.ask({})["result"]["hops"][0]

    def decisions(principal: str) -> list[dict[str, Any]]:
        with world.client(principal, world.agents_url) as client:
            found = client.get("/v1/decisions", params={"trace_id": hop["trace_id"]})
        return list(found.json()["decisions"])

    [mine] = [d for d in decisions("shop-frontend") if d["request_id"] == hop["request_id"]]
    assert mine["delegation"] == {"on_behalf_of": "shop-frontend", "via": VIA, "by": "cs-agents"}
    assert mine["principal"] == "shop-frontend"
    seen_by_agent = decisions("cs-agents")
    assert [d["request_id"] for d in seen_by_agent] == [hop["request_id"]]  # not the caller's
    assert [d["request_id"] for d in decisions("someone-else")] == []
