"""Routing by text through a real coordinator and real agents, on memory and Redis."""

from __future__ import annotations

import pytest

SHOP = {
    "logistics": (
        "logistics.track",
        "物流查询：快递到哪了、包裹什么时候到、配送进度",
        ["我的快递到哪了", "包裹怎么还没送到", "东西怎么还没到", "查一下物流"],
    ),
    "orders": (
        "order.manage",
        "订单管理：查订单、取消订单、修改收货地址",
        ["我想取消订单", "帮我查一下订单状态", "修改订单地址"],
    ),
    "faq": (
        "faq.answer",
        "常见问题：退换货政策、发票、会员积分",
        ["怎么开发票", "退货政策是什么", "积分怎么用"],
    ),
}
TEXT = "我买的东西怎么还没到"
# "check the order's logistics": an order question as much as a parcel one ("查一下" opens an
# example of each). "订单物流状态" leans to orders now that the classifier reads the words:
# "订单…状态" is an order example's.
AMBIGUOUS = "查一下订单物流"
OUT_OF_SCOPE = "今天天气怎么样"  # shares a word or two with the cards, means none of them


@pytest.fixture
def shop(register, fake_agents, matching_ready):
    """The three customer-service agents, registered with Chinese cards; the router has
    fitted and calibrated both default matchers on them."""
    agents = {}
    for name, (capability, description, examples) in SHOP.items():
        agent, endpoint = fake_agents(name=name)
        response = register(
            f"{name}-1", endpoint, capability, description=description, examples=examples
        )
        assert response.status_code == 201, response.text
        agents[name] = agent
    matching_ready()
    return agents


@pytest.fixture
def generic(register, fake_agents):
    agent, endpoint = fake_agents(name="human")
    response = register("human-1", endpoint, "human.handoff", generic=True, description="人工客服")
    assert response.status_code == 201, response.text
    return agent


def test_route_explains_the_choice_of_logistics_for_a_late_parcel(http, shop):
    response = http.post("/v1/route", json={"text": TEXT})
    assert response.status_code == 200, response.text
    route = response.json()
    assert (route["capability"], route["agent_id"], route["rule"]) == (
        "logistics.track",
        "logistics-1",
        "best",
    )
    first = route["candidates"][0]
    assert set(first["match"]) == {"lexical", "embedding", "raw"}
    assert set(first["factors"]) >= {"match", "health", "load", "success"}
    assert first["factors"]["match"] >= route["text"]["min_confidence"] == 0.5
    others = {c["capability"]: c for c in route["candidates"][1:]}
    assert all(c["factors"]["match"] < first["factors"]["match"] for c in others.values())
    second = max(c["factors"]["match"] for c in others.values())
    assert route["margin"] == pytest.approx(first["factors"]["match"] - second, abs=1e-5)
    assert route["margin"] >= route["text"]["margin"] == 0.15
    assert route["text"]["matchers"] == ["lexical", "embedding"]
    assert route["text"]["pending"] == [] and route["text"]["calibrated"] is True
    assert route["policy_version"] == http.get("/v1/policy").json()["version"]


def test_invoke_with_text_delivers_to_the_matched_agent(http, shop):
    response = http.post("/v1/invoke", json={"text": TEXT, "payload": {"order": "A-1"}})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["agent_id"] == "logistics-1"
    assert body["route"]["rule"] == "best"
    assert [r.body["payload"] for r in shop["logistics"].received] == [{"order": "A-1"}]
    assert shop["orders"].received == [] and shop["faq"].received == []


@pytest.mark.parametrize(
    ("text", "status", "code", "rule"),
    [(AMBIGUOUS, 422, "ambiguous", "margin"), (OUT_OF_SCOPE, 404, "no_match", "no_match")],
)
def test_unclear_text_is_refused_with_the_top_candidates(http, shop, text, status, code, rule):
    routed = http.post("/v1/route", json={"text": text}).json()
    assert (routed["capability"], routed["agent_id"], routed["rule"]) == (None, None, rule)
    response = http.post("/v1/invoke", json={"text": text, "payload": {}})
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert error["route"]["rule"] == rule
    assert error["route"]["candidates"], "the refusal lists what it weighed"
    assert all(not agent.received for agent in shop.values())


@pytest.mark.parametrize(("text", "reason"), [(AMBIGUOUS, "margin"), (OUT_OF_SCOPE, "no_match")])
def test_a_generic_agent_takes_what_the_router_will_not_guess(http, shop, generic, text, reason):
    routed = http.post("/v1/route", json={"text": text}).json()
    assert (routed["agent_id"], routed["rule"], routed["refused_by"]) == (
        "human-1",
        "generic",
        reason,
    )
    response = http.post("/v1/invoke", json={"text": text, "payload": {"q": 1}})
    assert response.status_code == 200, response.text
    assert response.json()["agent_id"] == "human-1"
    assert [r.body["payload"] for r in generic.received] == [{"q": 1}]
    assert all(not agent.received for agent in shop.values())
