"""`POST /v1/route` and `POST /v1/invoke` with text, per caller: a key granted some
capabilities is routed among them only. The decision, its candidates, `text` and
`ranked` never name another capability, whatever the text fits best (memory and Redis);
an admin key, allowed everything, sees the other group's capability the same text fits.
On `/v1/invoke` a text that fits best a capability the key may not invoke is not refused
403: it goes to the best one the key may invoke when that one's own confidence passes
the thresholds, else it is `no_match`, as `/v1/route` decides it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from ranked_kit import ADMIN, HR, PARCEL, SHOP, secured_catalog

from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_until

# texts an HR tool fits best, one a shop tool fits, and texts no tool fits
HR_TEXTS = (
    "I need a copy of my payslip for March",
    "run the monthly payroll and pay the salaries",
    "book two days of vacation leave next week",
)
TEXTS = (*HR_TEXTS, PARCEL, "xyzzy plugh", "今天天气怎么样")


@pytest.fixture
def world(settings: Settings) -> Iterator[tuple[str, dict[str, str]]]:
    with secured_catalog(settings, {"shop": SHOP, "hr": HR}) as (url, keys, _):
        yield url, keys


def _route(url: str, key: str, body: dict[str, object]) -> dict[str, object]:
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {key}"}, timeout=30) as c:
        answer = c.post("/v1/route", json=body)
    assert answer.status_code == 200, answer.text
    decision: dict[str, object] = answer.json()
    return decision


def _named(decision: dict[str, object]) -> set[str]:
    """Every capability the answer names anywhere."""
    named = {c["capability"] for c in decision["candidates"]}  # type: ignore[union-attr,index]
    named |= {r["capability"] for r in decision["ranked"]}  # type: ignore[union-attr,index]
    text = decision["text"]
    assert isinstance(text, dict)
    named |= set(text["not_mine"])
    if text["learned"] is not None:
        named.add(text["learned"]["capability"])
    if decision["capability"] is not None:
        named.add(str(decision["capability"]))
    return named


def test_a_key_is_routed_among_the_capabilities_it_may_invoke_only(
    world: tuple[str, dict[str, str]],
) -> None:
    url, keys = world
    for group, tools in (("shop", SHOP), ("hr", HR)):
        for text in TEXTS:
            decision = _route(url, keys[group], {"text": text, "top_k": 10})
            assert _named(decision) <= set(tools), (group, text, _named(decision))


def test_the_admin_sees_what_the_text_fits_in_either_group(
    world: tuple[str, dict[str, str]],
) -> None:
    url, keys = world
    for text in HR_TEXTS:
        admin = _route(url, keys["admin"], {"text": text, "top_k": 10})
        shop = _route(url, keys["shop"], {"text": text, "top_k": 10})
        assert _named(admin) & set(HR), text  # the text does fit an HR tool ...
        assert not _named(shop) & set(HR), text  # ... which the shop key never sees


# Two refund tools in two groups: texts about a refund fit the shop's best
BILLING = {
    "billing.refund": "Refund the money a customer paid for an order to their card",
    "billing.invoice": "Issue the invoice of an order",
}
MONEY_BACK = "I want my money back for the order I returned"  # shop.refund, far ahead
REFUND_PAID = "refund the money I paid for my order"  # shop.refund, billing.refund close behind


def _invoke(url: str, key: str, text: str) -> httpx.Response:
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {key}"}, timeout=30) as c:
        return c.post("/v1/invoke", json={"text": text})


def _fitted(url: str) -> None:
    """Until every text matcher is fitted on the catalog (the encoder loads meanwhile)."""
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {ADMIN}"}) as admin:
        wait_until(
            lambda: admin.get("/v1/policy").json()["matching"]["current"] or None,
            "the text matchers to fit the catalog",
            timeout_s=30,
        )


def test_invoke_routes_a_text_among_the_capabilities_the_key_may_invoke(
    settings: Settings,
) -> None:
    with secured_catalog(settings, {"shop": SHOP, "billing": BILLING}) as (url, keys, agent):
        _fitted(url)
        # as the admin sees it, both texts fit the shop's refund best
        admin = _route(url, ADMIN, {"text": MONEY_BACK})
        assert admin["capability"] == "shop.refund", admin
        admin = _route(url, ADMIN, {"text": REFUND_PAID})
        assert admin["candidates"][0]["capability"] == "shop.refund", admin  # type: ignore[index]
        delivered = len(agent.received)

        # the billing key may not invoke it: the best billing tool, if it passes on its own
        taken = _invoke(url, keys["billing"], REFUND_PAID)
        assert taken.status_code == 200, taken.text
        assert taken.json()["route"]["capability"] == "billing.refund"
        assert len(agent.received) == delivered + 1
        assert agent.received[-1].body["capability"] == "billing.refund"

        # ... else no_match, with the numbers, naming no capability the key may not invoke
        refused = _invoke(url, keys["billing"], MONEY_BACK)
        assert refused.status_code == 404, refused.text
        error = refused.json()["error"]
        assert error["code"] == "no_match"
        route = error["route"]
        assert route["thresholds"][0]["name"] == "min_confidence"
        assert route["thresholds"][0]["passed"] is False
        assert {c["capability"] for c in route["candidates"]} <= set(BILLING)
        assert len(agent.received) == delivered + 1  # nothing delivered

        # and /v1/invoke decides as /v1/route does, for every key and text
        for group, tools in (("shop", SHOP), ("billing", BILLING)):
            for text in (MONEY_BACK, REFUND_PAID, *TEXTS):
                decision = _route(url, keys[group], {"text": text})
                answer = _invoke(url, keys[group], text)
                assert answer.status_code in (200, 404, 422), (group, text, answer.text)
                body = answer.json()
                routed = body["route"] if answer.status_code == 200 else body["error"]["route"]
                assert routed["capability"] == decision["capability"], (group, text)
                assert routed["rule"] == decision["rule"], (group, text)
                assert {c["capability"] for c in routed["candidates"]} <= set(tools)


TWO_THINGS = "I need a copy of my payslip for March, and then where is my parcel SF123"


def test_a_fan_out_splits_a_text_among_the_capabilities_the_key_may_invoke(
    world: tuple[str, dict[str, str]],
) -> None:
    url, keys = world
    _fitted(url)
    body = {"text": TWO_THINGS, "mode": "fanout"}
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {ADMIN}"}) as admin:
        both = admin.post("/v1/invoke", json=body, timeout=30)
    assert both.status_code == 200, both.text
    assert [p["capability"] for p in both.json()["parts"]] == ["hr.payslip", "shop.track_parcel"]

    # the shop key is not split a part it may not invoke: one plain invoke of the text
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {keys['shop']}"}) as c:
        plain = c.post("/v1/invoke", json=body, timeout=30)
    assert plain.status_code in (200, 404, 422), plain.text
    answer = plain.json()
    assert "parts" not in answer
    routed = answer["route"] if plain.status_code == 200 else answer["error"]["route"]
    assert {c["capability"] for c in routed["candidates"]} <= set(SHOP)


def test_a_generic_agent_the_key_may_not_invoke_never_takes_its_text(
    world: tuple[str, dict[str, str]],
) -> None:
    url, keys = world
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {ADMIN}"}) as admin:
        endpoint = admin.get("/v1/agents/hr-agent").json()["transport"]["endpoint"]
        generic = {
            "id": "hr-desk",
            "capabilities": ["hr.helpdesk"],
            "description": "answers any HR question",
            "generic": True,
            "transport": {"type": "http", "endpoint": endpoint},
        }
        assert admin.post("/v1/agents", json=generic).status_code == 201
    for key, taken in (("admin", True), ("hr", True), ("shop", False)):
        decision = _route(url, keys[key], {"text": "xyzzy plugh"})
        assert (decision["capability"] == "hr.helpdesk") is taken, (key, decision)
        assert (decision["rule"] == "generic") is taken, (key, decision)
        if not taken:
            assert "hr.helpdesk" not in _named(decision)


PARSER_POLICY = """
intent_parser = "intent.parse"

[intent_escalation]
below = 0.99
rate_per_s = 100.0
burst = 10
"""


def test_the_intent_parser_s_pick_the_key_may_not_invoke_is_not_taken(
    settings: Settings, fake_agents, tmp_path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(PARSER_POLICY, encoding="utf-8")
    secured = Settings(
        **{**settings.model_dump(), "auth": "on", "admin_key": ADMIN, "policy_file": policy}
    )
    parser, parser_endpoint = fake_agents(
        answer={"capability": "refund.request", "confidence": 0.9}
    )
    _, endpoint = fake_agents(name="desk")
    cards = {
        "intent.parse": ("parser-1", parser_endpoint, "intent parser"),
        "refund.request": ("refund-1", endpoint, "退款 退货退款"),
        "order.query": ("order-1", endpoint, "订单 状态 查询订单"),
    }
    with (
        run_coordinator(secured) as (url, _),
        httpx.Client(base_url=url, headers={"authorization": f"Bearer {ADMIN}"}) as admin,
    ):
        for tag, (agent_id, agent_endpoint, description) in cards.items():
            body = {
                "id": agent_id,
                "capabilities": [tag],
                "description": description,
                "transport": {"endpoint": agent_endpoint},
            }
            assert admin.post("/v1/agents", json=body).status_code == 201
        grant = {"principal": "orders-app", "role": "caller", "capabilities": ["order.*"]}
        key = admin.post("/v1/keys", json=grant).json()["key"]
        text = "钱什么时候能回到我卡上"

        asked_by_admin = _route(url, ADMIN, {"text": text})
        asked_by_orders = _route(url, key, {"text": text + "呢"})

    assert asked_by_admin["capability"] == "refund.request"  # the parser's pick ...
    assert len(parser.received) == 2
    assert asked_by_orders["capability"] != "refund.request"  # ... never for this key
    assert not {c["capability"] for c in asked_by_orders["candidates"]} - {"order.query"}
    for delivery in parser.received[1:]:  # nor is it offered to the parser on its behalf
        offered = {c["capability"] for c in delivery.body["payload"]["candidates"]}
        assert offered <= {"order.query"}
