"""A federated FastMCP tool reached by text: numbers in the words (`3 kg`, `2.5公斤`) fill
its `weight_kg: number` parameter, and the dict it returns as JSON text reaches the caller
as that object (memory and Redis)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from peers.mcp_servers import McpServer

from agent_reach.testing.waiting import wait_until


@pytest.fixture
def parcel_desk(tmp_path: Path, http: httpx.Client) -> Iterator[McpServer]:
    server = McpServer("python", tmp_path / "ledger.txt", "mcp_parcel_server.py").start()
    try:
        body = {"id": "desk", "transport": {"type": "mcp", "endpoint": server.url}, "ttl": 600}
        registered = http.post("/v1/agents", json=body)
        assert registered.status_code == 201, registered.text
        assert registered.json()["capabilities"] == ["desk.ship_parcel"]
        wait_until(  # texts are routed once the matchers have fitted the new card
            lambda: http.get("/v1/policy").json()["matching"]["current"],
            "the text matchers to fit the catalog",
            timeout_s=30,
        )
        yield server
    finally:
        server.kill()


@pytest.mark.parametrize(
    ("text", "sent"),
    [
        ("Book the delivery of a 3 kg parcel to Berlin", {"weight_kg": 3, "destination": "Berlin"}),
        ("寄一个2.5公斤的包裹到上海", {"weight_kg": 2.5, "destination": "上海"}),
    ],
)
def test_a_number_in_the_text_fills_the_tool_and_its_json_text_is_the_result(
    http: httpx.Client, parcel_desk: McpServer, text: str, sent: dict[str, object]
) -> None:
    answer = http.post("/v1/invoke", json={"text": text})
    assert answer.status_code == 200, answer.text
    assert answer.json()["route"]["capability"] == "desk.ship_parcel"
    assert answer.json()["result"] == {
        **sent,
        "price_eur": round(4.5 + 1.2 * float(str(sent["weight_kg"])), 2),
        "carrier": "DHL",
    }
    assert parcel_desk.executions() == [{"tool": "ship_parcel", **sent}]


def test_without_a_number_the_tool_is_not_called_with_a_guess(
    http: httpx.Client, parcel_desk: McpServer
) -> None:
    answer = http.post(
        "/v1/invoke", json={"text": "Book the delivery of a 3 kg or 5 kg parcel to Berlin"}
    )
    assert answer.status_code == 502, answer.text  # the tool refuses: weight_kg is required
    assert answer.json()["error"]["code"] == "mcp_tool_error"
    assert "weight_kg" in str(answer.json()["error"]["agent_answer"])
    assert parcel_desk.executions() == []
