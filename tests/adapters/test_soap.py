"""A spyne SOAP service reached unchanged: through the sidecar and the `soap` transport."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from peers.soap_inventory import NAMESPACE, soap_service
from sidecar_kit import running_sidecar

from agent_reach.testing.waiting import wait_until

CHECK_STOCK = {
    "soap_action": "CheckStock",
    "body": (
        f'<tns:CheckStock xmlns:tns="{NAMESPACE}"><tns:sku>{{{{ payload.sku }}}}</tns:sku>'
        "</tns:CheckStock>"
    ),
    "response": {
        "namespaces": {"tns": NAMESPACE},
        "map": {"in_stock": "number(//tns:CheckStockResult)"},
    },
}
DESCRIPTION = "ERP inventory: how many units of a SKU are in stock 库存"


def _sidecar_config(coordinator: str, url: str, version: str) -> dict[str, Any]:
    return {
        "coordinator": coordinator,
        "agent": {"id": "erp-sidecar", "description": DESCRIPTION},
        "service": {"url": url, "health_url": f"{url}?wsdl"},
        "capabilities": [
            {
                "capability": "erp.inventory.query",
                "description": DESCRIPTION,
                "examples": ["how many SKU-1 are in stock", "SKU-1 还有库存吗"],
                "input_schema": {"type": "object", "required": ["sku"]},
                "kind": "soap",
                "soap_version": version,
                **CHECK_STOCK,
            }
        ],
    }


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_sidecar_reaches_soap_by_capability_and_by_text(
    http: httpx.Client, coordinator: str, version: str
) -> None:
    with (
        soap_service(version) as (url, ledger),
        running_sidecar(_sidecar_config(coordinator, url, version)),
    ):
        agents = http.get("/v1/agents").json()["agents"]
        assert [a["id"] for a in agents] == ["erp-sidecar"]
        by_tag = http.post(
            "/v1/invoke", json={"capability": "erp.inventory.query", "payload": {"sku": "SKU-1"}}
        )
        assert by_tag.status_code == 200, by_tag.text
        assert by_tag.json()["result"] == {"in_stock": 7}
        by_text = http.post(
            "/v1/invoke",
            json={"text": "how many units of SKU-2 in stock", "payload": {"sku": "SKU-2"}},
        )
        assert by_text.status_code == 200, by_text.text
        assert by_text.json()["route"]["capability"] == "erp.inventory.query"
        assert by_text.json()["result"] == {"in_stock": 0}
        assert ledger.calls == ["SKU-1", "SKU-2"]
    assert http.get("/v1/agents").json()["agents"] == []  # deregistered on stop


def test_sidecar_runs_each_request_id_once(coordinator: str) -> None:
    with (
        soap_service() as (url, ledger),
        running_sidecar(_sidecar_config(coordinator, url, "1.1")) as (_, sidecar_url),
    ):
        delivery = {
            "request_id": "order-77",
            "capability": "erp.inventory.query",
            "payload": {"sku": "SKU-1"},
            "trace_id": "t" * 32,
            "hop": 4,
        }
        answers = [httpx.post(f"{sidecar_url}/invoke", json=delivery) for _ in range(3)]
        assert [a.json() for a in answers] == [{"in_stock": 7}] * 3
        assert ledger.calls == ["SKU-1"]


def test_soap_fault_is_a_502_with_the_fault_code_and_string(
    http: httpx.Client, coordinator: str
) -> None:
    with (
        soap_service() as (url, ledger),
        running_sidecar(_sidecar_config(coordinator, url, "1.1")),
    ):
        answer = http.post(
            "/v1/invoke", json={"capability": "erp.inventory.query", "payload": {"sku": "NOPE"}}
        )
        assert answer.status_code == 502
        error = answer.json()["error"]
        fault = error["agent_answer"]["error"]  # the sidecar's answer, as docs/adapters.md shows
        assert fault["code"] == "soap_fault"
        assert fault["fault_code"].endswith("Client.UnknownSku")
        assert fault["fault_string"] == "no such sku: NOPE"
        assert ledger.calls == ["NOPE"]  # a fault is the service's decision: never retried


def test_sidecar_probe_follows_the_service_health(coordinator: str) -> None:
    with soap_service() as (url, _):
        config = _sidecar_config(coordinator, url, "1.1")
        config["service"]["health_url"] = "http://127.0.0.1:9/health"  # nothing listens there
        with running_sidecar(config) as (_, sidecar_url):
            assert httpx.get(f"{sidecar_url}/health").status_code == 503
        with running_sidecar(_sidecar_config(coordinator, url, "1.1")) as (_, sidecar_url):
            # one probe may miss its 1 s on a loaded machine: the service being up must
            # show within a few probes, as the coordinator's own prober would see it
            wait_until(
                lambda: httpx.get(f"{sidecar_url}/health").status_code == 200,
                "the sidecar to report the SOAP service healthy",
            )


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_soap_transport_reaches_the_service_from_the_coordinator(
    http: httpx.Client, version: str
) -> None:
    with soap_service(version) as (url, ledger):
        registered = http.post(
            "/v1/agents",
            json={
                "id": "erp-direct",
                "capabilities": ["erp.inventory.query"],
                "description": DESCRIPTION,
                "examples": ["how many SKU-1 are in stock"],
                "transport": {
                    "type": "soap",
                    "endpoint": url,
                    "health_endpoint": f"{url}?wsdl",
                    "soap_version": version,
                    **CHECK_STOCK,
                },
            },
        )
        assert registered.status_code == 201, registered.text
        ok = http.post(
            "/v1/invoke",
            json={"text": "how many SKU-1 units are in stock?", "payload": {"sku": "SKU-1"}},
        )
        assert ok.status_code == 200, ok.text
        assert ok.json()["result"] == {"in_stock": 7}
        fault = http.post(
            "/v1/invoke",
            json={"capability": "erp.inventory.query", "payload": {"sku": "<b>&"}},
        )
        assert fault.status_code == 502
        error = fault.json()["error"]
        assert error["code"] == "soap_fault"
        assert error["fault_code"].endswith("Client.UnknownSku" if version == "1.1" else "Sender")
        assert error["fault_string"] == "no such sku: <b>&"  # escaped going in, read coming out
        assert ledger.calls == ["SKU-1", "<b>&"]


def test_a_template_reaching_outside_the_sandbox_is_refused_before_sending(
    http: httpx.Client,
) -> None:
    with soap_service() as (url, ledger):
        body = {
            "id": "erp-evil",
            "capabilities": ["erp.inventory.query"],
            "transport": {
                "type": "soap",
                "endpoint": url,
                "body": "<x>{{ payload.__class__.__mro__ }}</x>",
            },
        }
        assert http.post("/v1/agents", json=body).status_code == 201
        answer = http.post(
            "/v1/invoke", json={"capability": "erp.inventory.query", "payload": {"sku": "x"}}
        )
        assert answer.status_code == 422
        assert answer.json()["error"]["code"] == "template_refused"
        bad = {**body, "id": "erp-broken", "transport": {**body["transport"], "body": "{{ x"}}
        refused = http.post("/v1/agents", json=bad)
        assert refused.status_code == 422
        assert refused.json()["error"]["code"] == "invalid_template"
        assert ledger.calls == []
