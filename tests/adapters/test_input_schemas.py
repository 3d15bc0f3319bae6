"""A capability's `input_schema` is enforced at the coordinator before any delivery."""

from __future__ import annotations

import httpx

from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread

SKU_SCHEMA = {
    "type": "object",
    "properties": {
        "sku": {"type": "string", "pattern": "^[A-Z0-9-]{4,}$"},
        "qty": {"type": "integer", "minimum": 1},
    },
    "required": ["sku"],
}


def _register(http: httpx.Client, endpoint: str, **extra: object) -> httpx.Response:
    return http.post(
        "/v1/agents",
        json={
            "id": "inventory-1",
            "capabilities": ["inventory.check", "inventory.reserve"],
            "description": "库存查询 inventory stock check",
            "transport": {"type": "http", "endpoint": endpoint},
            **extra,
        },
    )


def test_payload_breaking_the_schema_is_422_with_problems_and_never_delivered(
    http: httpx.Client,
) -> None:
    agent = FakeAgent()
    with ServerThread(agent) as server:
        assert _register(http, f"{server.url}/invoke", input_schema=SKU_SCHEMA).status_code == 201
        bad = http.post(
            "/v1/invoke",
            json={"capability": "inventory.check", "payload": {"sku": "x", "qty": 0}},
        )
        assert bad.status_code == 422
        error = bad.json()["error"]
        assert error["code"] == "payload_invalid"
        assert {p["path"] for p in error["problems"]} == {"sku", "qty"}
        missing = http.post("/v1/invoke", json={"capability": "inventory.check", "payload": {}})
        assert missing.status_code == 422
        assert "'sku' is a required property" in missing.json()["error"]["problems"][0]["message"]
        assert agent.received == []
        good = http.post(
            "/v1/invoke",
            json={"capability": "inventory.check", "payload": {"sku": "AB-12", "qty": 2}},
        )
        assert good.status_code == 200, good.text
        assert len(agent.received) == 1


def test_a_skill_schema_overrides_the_agent_wide_one(http: httpx.Client) -> None:
    agent = FakeAgent()
    with ServerThread(agent) as server:
        skill = {
            "capability": "inventory.reserve",
            "input_schema": {"type": "object", "required": ["order_id"]},
        }
        response = _register(http, f"{server.url}/invoke", input_schema=SKU_SCHEMA, skills=[skill])
        assert response.status_code == 201, response.text
        reserve = http.post(
            "/v1/invoke", json={"capability": "inventory.reserve", "payload": {"sku": "AB-12"}}
        )
        assert reserve.status_code == 422
        assert reserve.json()["error"]["problems"][0]["message"].startswith("'order_id'")
        ok = http.post(
            "/v1/invoke", json={"capability": "inventory.reserve", "payload": {"order_id": 7}}
        )
        assert ok.status_code == 200
        assert len(agent.received) == 1


def test_text_routed_request_is_checked_against_the_routed_capability(
    http: httpx.Client,
) -> None:
    agent = FakeAgent()
    with ServerThread(agent) as server:
        assert _register(http, f"{server.url}/invoke", input_schema=SKU_SCHEMA).status_code == 201
        bad = http.post(
            "/v1/invoke",
            json={"text": "inventory stock check", "capability": None, "payload": {"qty": 3}},
        )
        assert bad.status_code == 422, bad.text
        assert bad.json()["error"]["code"] == "payload_invalid"
        # The same words (a catalog this small routes only clear texts before it can be
        # calibrated: docs/routing.md), now with the payload the capability takes.
        good = http.post(
            "/v1/invoke", json={"text": "inventory stock check", "payload": {"sku": "AB-12"}}
        )
        assert good.status_code == 200, good.text
        assert agent.received[-1].body["text"] == "inventory stock check"
        assert len(agent.received) == 1


def test_an_invalid_schema_is_refused_at_registration(http: httpx.Client) -> None:
    broken = {"type": "object", "properties": {"sku": {"type": "nope"}}}
    response = _register(http, "http://127.0.0.1:9/invoke", input_schema=broken)
    assert response.status_code == 422
    assert "not a valid JSON Schema" in response.text
