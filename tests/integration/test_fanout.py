"""Text fan-out: one utterance asking two things runs as a parallel workflow, on both backends."""

from __future__ import annotations

import pytest

SHOP = {
    "orders": (
        "order.status",
        "订单查询：查订单、订单状态、订单号",
        ["帮我查一下订单状态", "订单888怎么样了", "查订单"],
    ),
    "logistics": (
        "logistics.track",
        "物流查询：快递到哪了、包裹什么时候到、配送进度",
        ["我的快递到哪了", "物流到哪了", "查一下物流"],
    ),
}
TWO_THINGS = "查一下订单888的状态，再看看物流到哪了"


@pytest.fixture
def shop(register, fake_agents):
    agents = {}
    for name, (capability, description, examples) in SHOP.items():
        agent, endpoint = fake_agents(name=name, answer={"from": capability})
        answer = register(
            f"{name}-1", endpoint, capability, description=description, examples=examples
        )
        assert answer.status_code == 201, answer.text
        agents[name] = agent
    return agents


def test_two_requests_in_one_text_run_in_parallel_and_answer_each_part(http, shop):
    answer = http.post(
        "/v1/invoke", json={"text": TWO_THINGS, "mode": "fanout", "payload": {"order_no": "888"}}
    )

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["mode"], body["status"]) == ("fanout", "ok")
    assert [(p["text"], p["capability"], p["result"]) for p in body["parts"]] == [
        ("查一下订单888的状态", "order.status", {"from": "order.status"}),
        ("物流到哪了", "logistics.track", {"from": "logistics.track"}),
    ]
    delivered = shop["orders"].received[0].body
    assert delivered["payload"] == {"order_no": "888"}
    assert delivered["request_id"] == f"{body['run_id']}:part-1"
    assert len(shop["logistics"].received) == 1


def test_a_text_with_one_match_is_a_plain_invoke(http, shop):
    answer = http.post("/v1/invoke", json={"text": "我的快递到哪了", "mode": "fanout"})

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert "parts" not in body
    assert (body["status"], body["agent_id"]) == ("ok", "logistics-1")
    assert shop["orders"].received == []


def test_two_clauses_for_the_same_capability_are_one_plain_invoke(http, shop):
    answer = http.post(
        "/v1/invoke", json={"text": "我的快递到哪了，包裹什么时候到", "mode": "fanout"}
    )

    assert answer.status_code == 200, answer.text
    assert "parts" not in answer.json()
    assert len(shop["logistics"].received) == 1
