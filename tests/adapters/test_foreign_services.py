"""Unchanged services in Node (Express), Java (com.sun.net.httpserver) and plain XML,
reached through the sidecar and through the coordinator's own translating transports."""

from __future__ import annotations

from typing import Any

import httpx
from peers.xml_rates import NAMESPACE as RATES_NS
from peers.xml_rates import xml_service
from sidecar_kit import running_sidecar

ORDER_STATUS = {
    "capability": "order.status",
    "description": "where is my order, order status and delivery date 订单状态",
    "examples": ["where is my order A-100", "我的订单到哪了"],
    "method": "GET",
    "path": "/api/orders/{{ payload.order_id }}",
    "response": {"map": "data.order"},
}
ORDER_CANCEL = {
    "capability": "order.cancel",
    "description": "cancel an order 取消订单",
    "examples": ["please cancel my order", "取消订单"],
    "path": "/api/orders/{{ payload.order_id }}/cancel",
    "body": {"reason": "{{ text or 'none given' }}"},
    "response": {"map": {"cancelled": "data.cancelled", "reason": "data.reason"}},
}
TRACK = {
    "method": "GET",
    "path": "/track",
    "query": {"no": "{{ payload.no }}"},
    "response": {"map": "parcel"},
}
POINTS = {
    "path": "/legacy/points",
    "form": {"member": "{{ payload.member }}", "points": "{{ payload.points }}"},
    "response": {"format": "xml", "map": {"balance": "number(/result/balance)"}},
}
RATE = {
    "body": (
        f'<RateRequest xmlns="{RATES_NS}"><weight>{{{{ payload.kg }}}}</weight>'
        "<city>{{ payload.city }}</city></RateRequest>"
    ),
    "response": {
        "namespaces": {"r": RATES_NS},
        "map": {
            "price": "number(//r:price)",
            "currency": "string(//r:price/@currency)",
            "city": "//r:city",
        },
    },
}


def _calls(url: str) -> dict[str, int]:
    return httpx.get(f"{url}/calls").json()


def _sidecar(coordinator: str, url: str, agent_id: str, *caps: dict[str, Any]) -> dict[str, Any]:
    return {
        "coordinator": coordinator,
        "agent": {"id": agent_id},
        "service": {"url": url, "health_url": f"{url}/health"},
        "capabilities": list(caps),
    }


def _register(
    http: httpx.Client, agent_id: str, capability: str, transport: dict[str, Any], description: str
) -> None:
    response = http.post(
        "/v1/agents",
        json={
            "id": agent_id,
            "capabilities": [capability],
            "description": description,
            "transport": transport,
        },
    )
    assert response.status_code == 201, response.text


def test_express_service_through_the_sidecar(
    http: httpx.Client, coordinator: str, express_url: str
) -> None:
    before = _calls(express_url)
    config = _sidecar(coordinator, express_url, "orders-sidecar", ORDER_STATUS, ORDER_CANCEL)
    with running_sidecar(config) as (_, sidecar_url):
        status = http.post(
            "/v1/invoke", json={"capability": "order.status", "payload": {"order_id": "A-100"}}
        )
        assert status.status_code == 200, status.text
        assert status.json()["result"] == {"id": "A-100", "state": "shipped", "eta": "2026-12-03"}
        cancel = http.post(
            "/v1/invoke",
            json={"text": "please cancel my order, wrong size", "payload": {"order_id": "A-100"}},
        )
        assert cancel.status_code == 200, cancel.text
        assert cancel.json()["route"]["capability"] == "order.cancel"
        assert cancel.json()["result"] == {
            "cancelled": True,
            "reason": "please cancel my order, wrong size",
        }
        missing = http.post(
            "/v1/invoke", json={"capability": "order.status", "payload": {"order_id": "Z/../9"}}
        )
        assert missing.status_code == 502  # the service's 404, its path value percent-encoded
        # the sidecar's error, holding the service's own JSON answer
        relayed = missing.json()["error"]["agent_answer"]["error"]
        assert relayed["agent_answer"] == {"message": "no order Z/../9"}
        delivery = {
            "request_id": "cancel-1",
            "capability": "order.cancel",
            "payload": {"order_id": "A-100"},
            "trace_id": "t" * 32,
            "hop": 4,
        }
        for _ in range(3):
            assert httpx.post(f"{sidecar_url}/invoke", json=delivery).status_code == 200
    after = _calls(express_url)
    assert after["status"] - before["status"] == 2
    assert after["cancel"] - before["cancel"] == 2  # the repeated request_id called it once


def test_express_service_through_the_http_template_transport(
    http: httpx.Client, express_url: str
) -> None:
    before = _calls(express_url)
    transport = {"type": "http-template", "endpoint": express_url, **ORDER_STATUS}
    transport.pop("capability"), transport.pop("description"), transport.pop("examples")
    _register(http, "orders-direct", "order.status", transport, ORDER_STATUS["description"])
    answer = http.post(
        "/v1/invoke", json={"text": "where is my order A-100?", "payload": {"order_id": "A-100"}}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["state"] == "shipped"
    assert _calls(express_url)["status"] - before["status"] == 1


def test_java_service_query_string_and_form_endpoints(
    http: httpx.Client, coordinator: str, java_url: str
) -> None:
    before = _calls(java_url)
    _register(
        http,
        "tracking-direct",
        "parcel.track",
        {"type": "http-template", "endpoint": java_url, **TRACK},
        "track a parcel by its tracking number 查快递",
    )
    track = http.post(
        "/v1/invoke", json={"text": "track my parcel SF123 & co", "payload": {"no": "SF123 & co"}}
    )
    assert track.status_code == 200, track.text
    assert track.json()["result"] == {"no": "SF123 & co", "where": "Hangzhou hub"}
    config = _sidecar(
        coordinator,
        java_url,
        "points-sidecar",
        {"capability": "member.points", "description": "add loyalty points 积分", **POINTS},
    )
    with running_sidecar(config):
        points = http.post(
            "/v1/invoke",
            json={"capability": "member.points", "payload": {"member": "m-1", "points": 25}},
        )
        assert points.status_code == 200, points.text
        assert points.json()["result"] == {"balance": 125}
        by_text = http.post(
            "/v1/invoke",
            json={"text": "add loyalty points", "payload": {"member": "m", "points": 1}},
        )
        assert by_text.json()["result"] == {"balance": 101}
    after = _calls(java_url)
    assert (after["track"] - before["track"], after["points"] - before["points"]) == (1, 2)


def test_plain_xml_endpoint_by_transport_and_by_sidecar(
    http: httpx.Client, coordinator: str
) -> None:
    with xml_service() as (url, calls):
        _register(
            http,
            "rates-direct",
            "shipping.rate",
            {"type": "xml", "endpoint": f"{url}/rates", "health_endpoint": url, **RATE},
            "shipping cost quote for a parcel 运费",
        )
        quote = http.post(
            "/v1/invoke",
            json={"text": "shipping cost for my parcel", "payload": {"kg": 2, "city": "<杭州>"}},
        )
        assert quote.status_code == 200, quote.text
        assert quote.json()["result"] == {"price": 12, "currency": "CNY", "city": "<杭州>"}
        assert b"&lt;" in calls[0]  # the value was escaped into the document
        config = _sidecar(
            coordinator,
            f"{url}/rates",
            "rates-sidecar",
            {"capability": "shipping.quote", "kind": "xml", **RATE},
        )
        config["service"]["health_url"] = url
        with running_sidecar(config):
            sidecar_quote = http.post(
                "/v1/invoke",
                json={"capability": "shipping.quote", "payload": {"kg": 0.5, "city": "Xi'an"}},
            )
            assert sidecar_quote.json()["result"] == {
                "price": 9,
                "currency": "CNY",
                "city": "Xi'an",
            }
        assert len(calls) == 2
