"""`GET /v1/agents/{id}/card`: what the router matches an instance by, on memory and Redis."""

from __future__ import annotations

import httpx
from pydantic import SecretStr

from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator

ADMIN_KEY = "card-admin-" + "k" * 32
SKILLS = [
    {"capability": "order.query", "description": "订单查询", "examples": ["我的订单到哪了"]},
    {
        "capability": "order.cancel",
        "description": "取消订单",
        "examples": ["取消订单 123"],
        "idempotent": True,
    },
]
REGISTRATION = {
    "id": "orders-1",
    "capabilities": ["order.query", "order.cancel"],
    "description": "订单助手: 查询和取消",
    "examples": ["订单怎么还没到"],
    "skills": SKILLS,
    "transport": {"endpoint": "http://127.0.0.1:9/invoke"},
}


def test_the_card_gives_the_description_examples_and_each_skill(http, settings):
    assert http.post("/v1/agents", json=REGISTRATION).status_code == 201

    card = http.get("/v1/agents/orders-1/card").json()

    assert card == {
        "id": "orders-1",
        "description": "订单助手: 查询和取消",
        "examples": ["订单怎么还没到"],
        "skills": SKILLS,
        "complete": True,
    }
    assert "description" not in http.get("/v1/agents/orders-1").json()  # the listing stays lean
    missing = http.get("/v1/agents/nobody-1/card")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "unknown_agent"


def test_a_key_that_sees_some_capabilities_gets_only_their_skills(settings: Settings):
    secured = settings.model_copy(update={"auth": "on", "admin_key": SecretStr(ADMIN_KEY)})
    with run_coordinator(secured) as (url, _):
        admin = {"authorization": f"Bearer {ADMIN_KEY}"}
        assert httpx.post(f"{url}/v1/agents", json=REGISTRATION, headers=admin).status_code == 201
        minted = httpx.post(
            f"{url}/v1/keys",
            json={"principal": "cs-bot", "role": "caller", "capabilities": ["order.query"]},
            headers=admin,
        )
        caller = {"authorization": f"Bearer {minted.json()['key']}"}

        card = httpx.get(f"{url}/v1/agents/orders-1/card", headers=caller).json()

        assert card == {
            "id": "orders-1",
            "description": "",
            "examples": [],
            "skills": [SKILLS[0]],
            "complete": False,
        }
