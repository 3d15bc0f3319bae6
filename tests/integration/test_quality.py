"""The quality factor end to end: real HTTP agents, one of which bounces half its requests.

On memory and on Redis (two coordinators on Redis: the ledger is shared). The shape of
bench/quality.py on a smaller scale, without timed assertions: every bounced request is
served by the sibling within the same request, the bouncer ends with the smaller share,
its counts and factor are in the decision and in `GET /v1/agents`, and a `bad` rating —
by the caller, or by an agent that delegated the request — lowers the factor.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_reach import Agent, AgentRequest, ReachError, Settings
from agent_reach.testing.bouncer import BouncingAgent
from agent_reach.testing.servers import ServerThread, run_coordinator, stop_all
from agent_reach.testing.waiting import wait_until

ADMIN = "quality-admin-key-0123456789abcdef"
CAPABILITY = "quality.echo"
CONCURRENT = 4  # requests at once, as many as an instance's capacity
POLICY = """
[[access.delegate]]
principals = ["name:cs-agents"]
capabilities = ["quality.*"]
"""


@dataclass
class World:
    url: str  # the callers' coordinator
    other: str  # the agents' coordinator (the same one on memory)
    admin: httpx.Client
    keys: dict[str, str]
    bouncer: BouncingAgent
    steady: BouncingAgent

    def caller(self, principal: str = "shop") -> httpx.Client:
        auth = {"authorization": f"Bearer {self.keys[principal]}"}
        return httpx.Client(base_url=self.url, headers=auth, timeout=10)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    settings: dict[str, Any] = {
        "auth": "on",
        "admin_key": ADMIN,
        "policy_file": policy,
        "decision_log": "off",
    }
    if request.param == "redis":
        settings.update(
            registry_backend="redis",
            redis_url=request.getfixturevalue("redis_url"),
            redis_prefix=request.getfixturevalue("redis_prefix"),
        )
    with run_coordinator(Settings(**settings)) as (url, _):
        if request.param == "memory":
            yield from _world(url, url)
            return
        with run_coordinator(Settings(**settings)) as (other, _):
            yield from _world(url, other)


def _world(url: str, other: str) -> Iterator[World]:
    # Each answer takes a moment, so that requests sent at once are in flight together.
    bouncer = BouncingAgent("bouncer", bounce_rate=0.5, delay_s=0.05)
    steady = BouncingAgent("steady", delay_s=0.05)
    servers = [ServerThread(agent).start() for agent in (bouncer, steady)]
    headers = {"authorization": f"Bearer {ADMIN}"}
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=10) as admin:
            keys = {
                name: admin.post(
                    "/v1/keys", json={"principal": name, "role": role, "capabilities": grants}
                ).json()["key"]
                for name, role, grants in (
                    ("shop", "caller", ["quality.*", "cs.*"]),
                    ("stranger", "caller", ["quality.*"]),
                    ("cs-agents", "agent", ["cs.*"]),
                )
            }
            for agent, server in zip((bouncer, steady), servers, strict=True):
                spec = {
                    "id": agent.name,
                    "capabilities": [CAPABILITY],
                    "capacity": CONCURRENT,
                    "transport": {"type": "http", "endpoint": f"{server.url}/invoke"},
                }
                assert admin.post("/v1/agents", json=spec).status_code == 201
            wait_until(
                lambda: (
                    {a["status"] for a in admin.get("/v1/agents").json()["agents"]} == {"healthy"}
                ),
                "both instances to be probed healthy",
            )
            yield World(url, other, admin, keys, bouncer, steady)
    finally:
        stop_all(servers)


def test_a_bouncing_instance_never_fails_the_caller_and_loses_its_share(world: World) -> None:
    with world.caller() as caller:

        def invoke(_: int) -> str:
            answer = caller.post("/v1/invoke", json={"capability": CAPABILITY})
            assert answer.status_code == 200, answer.text  # 0 failures to the caller
            body = answer.json()
            if body["attempts"][0]["http_status"] == 421:
                assert body["agent_id"] == "steady"  # served by the sibling, same request
                assert body["status"] == "fallback"
            return str(body["attempts"][0]["agent_id"])

        # At first the two are alike: requests at once spread over both by their load.
        with ThreadPoolExecutor(CONCURRENT) as pool:
            firsts = list(pool.map(invoke, range(3 * CONCURRENT)))
        assert firsts.count("bouncer") >= 2 and world.bouncer.bounced >= 1
        last = [invoke(n) for n in range(20)]
        decision = caller.post("/v1/route", json={"capability": CAPABILITY}).json()
    assert last.count("bouncer") < last.count("steady")
    by_id = {c["agent_id"]: c for c in decision["candidates"]}
    assert by_id["bouncer"]["outcomes"]["bounced"] == world.bouncer.bounced
    assert by_id["bouncer"]["factors"]["quality"] < by_id["steady"]["factors"]["quality"]
    assert decision["agent_id"] == "steady"
    listed = {a["id"]: a for a in world.admin.get("/v1/agents").json()["agents"]}
    assert listed["bouncer"]["quality"]["outcomes"]["bounced"] == world.bouncer.bounced
    with httpx.Client(base_url=world.other, headers=world.admin.headers, timeout=10) as other:

        def seen_there() -> bool:  # the other coordinator reads the shared ledger
            agents = {a["id"]: a for a in other.get("/v1/agents").json()["agents"]}
            outcomes = agents["bouncer"]["quality"]["outcomes"]
            return outcomes.get("bounced") == world.bouncer.bounced

        wait_until(seen_there, "the other coordinator to count the bounces")


def test_a_bad_rating_by_the_caller_lowers_the_factor_and_counts_once(world: World) -> None:
    world.bouncer.bounce_rate = 0.0
    with world.caller() as caller:
        served = caller.post("/v1/invoke", json={"capability": CAPABILITY}).json()
        agent_id, request_id = served["agent_id"], served["request_id"]

        def quality() -> float:
            decision = caller.post("/v1/route", json={"capability": CAPABILITY}).json()
            return next(
                c["factors"]["quality"] for c in decision["candidates"] if c["agent_id"] == agent_id
            )

        before = quality()
        with world.caller("stranger") as stranger:
            refused = stranger.post(
                "/v1/feedback", json={"request_id": request_id, "rating": "bad"}
            )
        assert refused.status_code == 404
        assert refused.json()["error"]["code"] == "unknown_request"
        rated = caller.post("/v1/feedback", json={"request_id": request_id, "rating": "bad"})
        assert rated.status_code == 201, rated.text
        assert rated.json()["rated"] == {
            "request_id": request_id,
            "agent_id": agent_id,
            "rating": "bad",
        }
        assert quality() < before
        again = caller.post("/v1/feedback", json={"request_id": request_id, "rating": "good"})
        assert again.status_code == 409
        assert again.json()["error"]["code"] == "already_rated"
        both = caller.post(
            "/v1/feedback", json={"request_id": request_id, "rating": "bad", "capability": "x"}
        )
        assert both.status_code == 422


def test_an_agent_that_delegated_the_request_may_rate_it(world: World) -> None:
    """cs-bot delegates quality.echo on behalf of the caller, then rates what it got back;
    a delegation token of another chain may not rate it. Handing its own task on whole
    (sideways) is refused and counts as a bounce."""
    world.bouncer.bounce_rate = 0.0
    rated: dict[str, Any] = {}

    async def handle(request: AgentRequest) -> dict[str, Any]:
        if (request.payload or {}).get("sideways"):  # its own task, handed on whole
            try:
                await request.delegate("cs.answer")
            except ReachError as exc:
                return {"refused": exc.code}
        answered = await request.delegate(CAPABILITY)
        token = (request.delegation or {})["token"]
        async with httpx.AsyncClient(base_url=world.other, timeout=10) as http:
            answer = await http.post(
                "/v1/feedback",
                json={"request_id": answered.request_id, "rating": "bad"},
                headers={"authorization": f"Bearer {token}"},
            )
        rated[answered.request_id] = (answer.status_code, answer.json())
        return {"delegated": answered.request_id, "token": token}

    agent = Agent(
        "cs-bot", ["cs.answer"], coordinator_url=world.other, api_key=world.keys["cs-agents"]
    )
    agent.handler(handle)
    server = ServerThread(agent.app)
    agent.endpoint_url = f"{server.url}/invoke"
    server.start()
    try:
        wait_until(
            lambda: any(
                a["id"] == "cs-bot" for a in world.admin.get("/v1/agents").json()["agents"]
            ),
            "cs-bot to register",
        )
        with world.caller() as caller:
            first = caller.post("/v1/invoke", json={"capability": "cs.answer"}).json()["result"]
            second = caller.post("/v1/invoke", json={"capability": "cs.answer"}).json()["result"]
        status, body = rated[first["delegated"]]
        assert status == 201, body
        assert body["rated"]["rating"] == "bad"
        # the second chain's token may not rate the first chain's request
        with httpx.Client(base_url=world.url, timeout=10) as http:
            refused = http.post(
                "/v1/feedback",
                json={"request_id": first["delegated"], "rating": "good"},
                headers={"authorization": f"Bearer {second['token']}"},
            )
        assert refused.status_code == 404
        with world.caller() as caller:
            sideways = {"capability": "cs.answer", "payload": {"sideways": True}}
            assert caller.post("/v1/invoke", json=sideways).json()["result"] == {
                "refused": "delegation_cycle"
            }

        def bounced() -> Any:
            listed = {a["id"]: a for a in world.admin.get("/v1/agents").json()["agents"]}
            return listed["cs-bot"]["quality"]["outcomes"].get("bounced") == 1

        wait_until(bounced, "cs-bot's sideways hand-off to count as a bounce")
    finally:
        server.stop()


def test_when_every_instance_says_not_mine_the_421_is_the_answer(world: World) -> None:
    world.bouncer.bounce_rate = world.steady.bounce_rate = 1.0
    with world.caller() as caller:
        answer = caller.post("/v1/invoke", json={"capability": CAPABILITY})
    error = answer.json()["error"]
    assert answer.status_code != 200 and error["code"] != "no_instance"  # not suspended
    attempts = error["attempts"]
    assert sorted(a["agent_id"] for a in attempts) == ["bouncer", "steady"]
    assert {a["http_status"] for a in attempts} == {421}
