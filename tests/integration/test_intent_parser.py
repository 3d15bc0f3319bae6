"""An agent as the intent parser: asked for unsure texts through delivery, within a budget."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator

POLICY = """
intent_parser = "intent.parse"

[intent_escalation]
below = 0.6
rate_per_s = 0.001
burst = 1
"""
UNSURE = "钱什么时候能回到我卡上"  # close to nothing in the catalog's words


@pytest.fixture
def coordinator(settings: Settings, tmp_path: Path) -> Iterator[str]:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    with run_coordinator(settings.model_copy(update={"policy_file": policy})) as (url, _):
        yield url


def register(http: httpx.Client, agent_id: str, endpoint: str, capability: str, **card) -> None:
    body = {"id": agent_id, "capabilities": [capability], "transport": {"endpoint": endpoint}}
    assert http.post("/v1/agents", json={**body, **card}).status_code == 201


def test_an_unsure_text_is_parsed_by_the_agent_then_the_budget_stops_asking(
    coordinator: str, fake_agents
) -> None:
    parser, parser_endpoint = fake_agents(
        answer={"capability": "refund.request", "confidence": 0.9}
    )
    refunds, refund_endpoint = fake_agents(name="refunds")
    _, order_endpoint = fake_agents(name="orders")
    with httpx.Client(base_url=coordinator, timeout=10) as http:
        register(http, "parser-1", parser_endpoint, "intent.parse", description="intent parser")
        register(http, "refund-1", refund_endpoint, "refund.request", description="退款 退货退款")
        register(http, "order-1", order_endpoint, "order.query", description="订单 状态 查询订单")

        answer = http.post("/v1/invoke", json={"text": UNSURE, "request_id": "u-1"})
        second = http.post("/v1/route", json={"text": UNSURE + "呢"})

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["agent_id"] == "refund-1"
    assert body["route"]["intent"] == {
        "capability": "intent.parse",
        "outcome": "answered",
        "picked": "refund.request",
    }
    chosen = body["route"]["candidates"][0]
    assert chosen["match"]["intent_parser"] == 0.9
    assert len(parser.received) == 1 and len(refunds.received) == 1
    delivery = parser.received[0].body
    assert delivery["capability"] == "intent.parse"
    assert delivery["payload"]["text"] == UNSURE
    assert {c["capability"] for c in delivery["payload"]["candidates"]} <= {
        "refund.request",
        "order.query",
    }  # what the matchers found, never the parser itself
    assert delivery["trace_id"] == body["trace_id"]  # the same trace as the request

    assert second.status_code == 200, second.text
    assert second.json()["intent"] == {"capability": "intent.parse", "outcome": "over_budget"}
    assert len(parser.received) == 1  # over the budget: not asked
