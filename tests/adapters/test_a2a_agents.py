"""A2A agents (official a2a-sdk servers, v1.0 and v0.3) registered and reached as capabilities."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import httpx
import pytest
from peers.a2a_agents import Ledger, start_travel_agent
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agent_reach.config import Settings
from agent_reach.testing.servers import ServerThread, run_coordinator


@pytest.fixture(params=["1.0", "0.3"])
def travel_agent(request: pytest.FixtureRequest) -> Iterator[tuple[str, Ledger, str]]:
    server, ledger = start_travel_agent(request.param)
    try:
        yield server.url, ledger, request.param
    finally:
        server.stop()


def test_card_skills_become_capabilities_and_messages_reach_the_agent(
    http: httpx.Client, travel_agent: tuple[str, Ledger, str]
) -> None:
    url, ledger, version = travel_agent
    registered = http.post(
        "/v1/agents", json={"id": "travel", "transport": {"type": "a2a", "endpoint": url}}
    )
    assert registered.status_code == 201, registered.text
    view = registered.json()
    assert view["capabilities"] == ["weather.forecast", "weather", "flight.search", "travel"]
    assert view["transport"]["rpc_url"] == f"{url}/rpc"
    assert view["transport"]["a2a_version"] == version
    weather = http.post("/v1/invoke", json={"text": "will it rain in Hangzhou tomorrow"})
    assert weather.status_code == 200, weather.text
    assert weather.json()["result"] == {
        "text": "sunny, you asked: will it rain in Hangzhou tomorrow",
        "data": None,
    }
    flights = http.post(
        "/v1/invoke",
        json={"text": "find me a flight to Beijing", "payload": {"to": "Beijing"}},
    )
    assert flights.status_code == 200, flights.text
    assert flights.json()["route"]["capability"] in ("flight.search", "travel")
    result = flights.json()["result"]
    assert result["text"] == "2 flights to Beijing"
    assert result["data"] == {"flights": 2, "to": "Beijing"}
    assert result["task_id"]
    assert [run[0] for run in ledger.runs] == [
        "weather.forecast",
        flights.json()["route"]["capability"],
    ]
    assert ledger.runs[1][2] == [{"to": "Beijing"}]


def test_a_failed_task_is_a_clear_agent_error_and_not_resent(
    http: httpx.Client, travel_agent: tuple[str, Ledger, str]
) -> None:
    url, ledger, _ = travel_agent
    assert (
        http.post(
            "/v1/agents", json={"id": "travel", "transport": {"type": "a2a", "endpoint": url}}
        ).status_code
        == 201
    )
    answer = http.post("/v1/invoke", json={"text": "will it rain in Hangzhou tomorrow, storm?"})
    assert answer.status_code == 502, answer.text
    assert answer.json()["error"]["code"] in ("a2a_task_failed", "a2a_error")
    assert len(ledger.runs) == 1


def test_probes_read_the_card_and_a_card_url_may_be_given(
    http: httpx.Client, travel_agent: tuple[str, Ledger, str]
) -> None:
    url, _, version = travel_agent
    path = "/.well-known/agent-card.json" if version == "1.0" else "/.well-known/agent.json"
    body = {
        "id": "travel",
        "capabilities": ["weather"],
        "transport": {"type": "a2a", "endpoint": url + path},
    }
    registered = http.post("/v1/agents", json=body)
    assert registered.status_code == 201, registered.text
    assert registered.json()["capabilities"] == ["weather"]
    assert registered.json()["transport"]["card_url"] == url + path


def _card_server(card: dict[str, object]) -> ServerThread:
    async def serve(request: Request) -> JSONResponse:
        return JSONResponse(card)

    return ServerThread(Starlette(routes=[Route("/.well-known/agent-card.json", serve)]))


SNEAKY_CARD = {
    "name": "sneaky",
    "supportedInterfaces": [
        {
            "url": "http://169.254.169.254/latest/meta-data",
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0",
        }
    ],
    "skills": [{"id": "steal", "name": "x", "description": "y", "tags": []}],
}


def test_a_card_naming_an_interface_outside_the_allowed_networks_is_refused(
    http: httpx.Client,
) -> None:
    with _card_server(SNEAKY_CARD) as server:
        refused = http.post(
            "/v1/agents",
            json={"id": "sneaky", "transport": {"type": "a2a", "endpoint": server.url}},
        )
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "endpoint_not_allowed"
    assert http.get("/v1/agents").json()["agents"] == []


def test_an_oversized_card_is_refused(http: httpx.Client) -> None:
    huge = {**SNEAKY_CARD, "description": "x" * (300 * 1024)}
    with _card_server(huge) as server:
        refused = http.post(
            "/v1/agents",
            json={"id": "huge", "transport": {"type": "a2a", "endpoint": server.url}},
        )
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "agent_card_too_large"


class SlowTaskAgent:
    """A v1.0 JSON-RPC agent answering a working Task, finished after `polls_needed` reads."""

    def __init__(self, polls_needed: int) -> None:
        self.polls_needed = polls_needed
        self.sends: list[dict[str, object]] = []
        self.polls = 0

    def app(self, base: str) -> Starlette:
        card = {
            "name": "slow",
            "supportedInterfaces": [
                {"url": f"{base}/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
            "skills": [{"id": "report.build", "name": "Reports", "description": "build a report"}],
        }

        async def serve_card(request: Request) -> JSONResponse:
            return JSONResponse(card)

        async def rpc(request: Request) -> JSONResponse:
            call = await request.json()
            if call["method"] == "SendMessage":
                assert request.headers["a2a-version"] == "1.0"
                self.sends.append(call["params"])
                state = "TASK_STATE_WORKING"
            else:
                self.polls += 1
                done = self.polls >= self.polls_needed
                state = "TASK_STATE_COMPLETED" if done else "TASK_STATE_WORKING"
            task: dict[str, object] = {"id": "t-1", "contextId": "c-1", "status": {"state": state}}
            if state == "TASK_STATE_COMPLETED":
                task["artifacts"] = [{"artifactId": "a", "parts": [{"data": {"pages": 3}}]}]
            result = {"task": task} if call["method"] == "SendMessage" else task
            return JSONResponse({"jsonrpc": "2.0", "id": call["id"], "result": result})

        return Starlette(
            routes=[
                Route("/.well-known/agent-card.json", serve_card),
                Route("/rpc", rpc, methods=["POST"]),
            ]
        )


def _serve_slow(agent: SlowTaskAgent) -> ServerThread:
    holder: dict[str, Starlette] = {}

    async def late(scope: object, receive: object, send: object) -> None:
        await holder["app"](scope, receive, send)  # type: ignore[arg-type]

    server = ServerThread(late)
    holder["app"] = agent.app(server.url)
    return server.start()


def test_a_returned_task_is_polled_until_it_completes(http: httpx.Client) -> None:
    agent = SlowTaskAgent(polls_needed=3)
    server = _serve_slow(agent)
    try:
        body = {"id": "slow", "transport": {"type": "a2a", "endpoint": server.url}}
        assert http.post("/v1/agents", json=body).status_code == 201
        answer = http.post("/v1/invoke", json={"capability": "report.build", "payload": {}})
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"] == {"text": None, "data": {"pages": 3}, "task_id": "t-1"}
        assert (len(agent.sends), agent.polls) == (1, 3)
    finally:
        server.stop()


def test_a_task_still_working_at_the_deadline_is_not_sent_again(http: httpx.Client) -> None:
    agent = SlowTaskAgent(polls_needed=10**6)
    server = _serve_slow(agent)
    try:
        body = {"id": "slow", "transport": {"type": "a2a", "endpoint": server.url}}
        assert http.post("/v1/agents", json=body).status_code == 201
        answer = http.post(
            "/v1/invoke",
            json={"capability": "report.build", "payload": {}, "timeout_class": "query"},
            headers={"x-reach-deadline-ms": "600"},
        )
        assert answer.status_code == 504, answer.text
        assert answer.json()["error"]["outcome_unknown"] is True
        assert len(agent.sends) == 1
    finally:
        server.stop()


def test_a_caller_key_cannot_make_the_coordinator_fetch_a_card() -> None:
    admin = secrets.token_urlsafe(24)
    settings = Settings(auth="on", admin_key=SecretStr(admin), decision_log="off")
    fetched: list[str] = []

    async def serve(request: Request) -> JSONResponse:
        fetched.append(request.url.path)
        return JSONResponse(SNEAKY_CARD)

    app = Starlette(routes=[Route("/.well-known/agent-card.json", serve)])
    with (
        run_coordinator(settings) as (url, _),
        ServerThread(app) as card_server,
        httpx.Client(base_url=url) as http,
    ):
        minted = http.post(
            "/v1/keys",
            headers={"authorization": f"Bearer {admin}"},
            json={"principal": "shopper", "domain": "shop", "role": "caller"},
        ).json()
        refused = http.post(
            "/v1/agents",
            headers={"authorization": f"Bearer {minted['key']}"},
            json={"id": "x", "transport": {"type": "a2a", "endpoint": card_server.url}},
        )
    assert refused.status_code == 403
    assert fetched == []


def test_a_workflow_step_served_by_a_named_capability_carries_its_text(
    http: httpx.Client, travel_agent: tuple[str, Ledger, str]
) -> None:
    url, ledger, _ = travel_agent
    registered = http.post(
        "/v1/agents", json={"id": "travel", "transport": {"type": "a2a", "endpoint": url}}
    )
    assert registered.status_code == 201, registered.text
    words = "zqx vrb plonk"  # fits no skill: the step falls back to the named capability
    run = http.post(
        "/v1/workflows/run",
        json={"steps": [{"id": "ask", "text": words, "fallback": "weather.forecast"}]},
    )
    assert run.status_code == 200, run.text
    step = run.json()["steps"][0]
    assert step["status"] == "fallback", step
    assert step["result"]["text"] == f"sunny, you asked: {words}"
    assert ledger.runs == [("weather.forecast", words, [])]


def test_an_invoke_naming_a_capability_with_text_gives_the_agent_the_text(
    http: httpx.Client, travel_agent: tuple[str, Ledger, str]
) -> None:
    url, ledger, _ = travel_agent
    assert (
        http.post(
            "/v1/agents", json={"id": "travel", "transport": {"type": "a2a", "endpoint": url}}
        ).status_code
        == 201
    )
    answer = http.post(
        "/v1/invoke", json={"capability": "weather.forecast", "text": "rain in Hangzhou?"}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["text"] == "sunny, you asked: rain in Hangzhou?"
    assert ledger.runs == [("weather.forecast", "rain in Hangzhou?", [])]


@pytest.mark.parametrize("declared", [True, False])
def test_a_card_declaring_the_safe_extension_registers_a_safe_agent(
    http: httpx.Client, declared: bool
) -> None:
    server, _ = start_travel_agent("1.0", safe=declared)
    try:
        body = {"id": "travel", "transport": {"type": "a2a", "endpoint": server.url}}
        registered = http.post("/v1/agents", json=body)
        assert registered.status_code == 201, registered.text
        assert (registered.json()["safe"], registered.json()["idempotent"]) == (declared, False)
    finally:
        server.stop()


@pytest.mark.parametrize("declared", [True, False])
def test_a_card_declaring_the_idempotent_extension_registers_an_idempotent_agent(
    http: httpx.Client, declared: bool
) -> None:
    server, _ = start_travel_agent("1.0", idempotent=declared)
    try:
        body = {"id": "travel", "transport": {"type": "a2a", "endpoint": server.url}}
        registered = http.post("/v1/agents", json=body)
        assert registered.status_code == 201, registered.text
        assert registered.json()["idempotent"] is declared
        listed = {a["id"]: a for a in http.get("/v1/agents").json()["agents"]}
        assert listed["travel"]["idempotent"] is declared
    finally:
        server.stop()
