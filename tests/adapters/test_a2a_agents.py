"""A2A agents (official a2a-sdk servers, v1.0 and v0.3) registered and reached as capabilities."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from peers.a2a_agents import Ledger, start_travel_agent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agent_reach.testing.servers import ServerThread


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
    weather = http.post("/v1/invoke", json={"capability": "weather", "text": "Hangzhou tomorrow?"})
    assert weather.status_code == 200, weather.text
    assert weather.json()["result"] == {
        "text": "sunny, you asked: Hangzhou tomorrow?",
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
    assert [run[0] for run in ledger.runs] == ["weather", flights.json()["route"]["capability"]]
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
    answer = http.post(
        "/v1/invoke", json={"capability": "weather", "text": "storm warning for Xiamen"}
    )
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
