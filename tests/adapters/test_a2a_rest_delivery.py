"""Deliveries to an A2A agent (the official a2a-sdk server) whose card prefers the HTTP+JSON
binding: the coordinator sends, polls and reads refusals on that binding."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from peers.a2a_agents import REST_PATH, Ledger, start_travel_agent


@pytest.fixture
def rest_agent() -> Iterator[tuple[str, Ledger]]:
    server, ledger = start_travel_agent("rest")
    try:
        yield server.url, ledger
    finally:
        server.stop()


def test_the_binding_the_card_prefers_carries_messages_and_tasks(
    http: httpx.Client, rest_agent: tuple[str, Ledger]
) -> None:
    url, ledger = rest_agent
    registered = http.post(
        "/v1/agents", json={"id": "travel", "transport": {"type": "a2a", "endpoint": url}}
    )
    assert registered.status_code == 201, registered.text
    transport = registered.json()["transport"]
    assert (transport["a2a_binding"], transport["rpc_url"]) == ("HTTP+JSON", url + REST_PATH)
    weather = http.post("/v1/invoke", json={"capability": "weather.forecast", "text": "rain?"})
    assert weather.status_code == 200, weather.text
    assert weather.json()["result"]["text"] == "sunny, you asked: rain?"
    flights = http.post(
        "/v1/invoke", json={"capability": "flight.search", "payload": {"to": "Beijing"}}
    )
    assert flights.status_code == 200, flights.text
    assert flights.json()["result"]["data"] == {"flights": 2, "to": "Beijing"}
    failed = http.post("/v1/invoke", json={"capability": "weather.forecast", "text": "storm?"})
    assert failed.status_code == 502, failed.text
    assert failed.json()["error"]["code"] in ("a2a_task_failed", "a2a_error")
    assert [run[0] for run in ledger.runs] == [
        "weather.forecast",
        "flight.search",
        "weather.forecast",
    ]
