"""The v1 control plane and invoke path against real FakeAgents, on memory and Redis."""

from __future__ import annotations

import pytest

from agent_reach.testing.waiting import wait_all_healthy, wait_until


def test_register_answers_201_with_the_instance_and_lists_it(http, register, fake_agents):
    _, endpoint = fake_agents()
    response = register(
        "product-assistant-01",
        endpoint,
        "product.query",
        "Inventory.Check",
        display_name="商品助手",
        domain="customer-service",
        weight=2.0,
    )
    assert response.status_code == 201
    view = response.json()
    assert view["id"] == "product-assistant-01"
    assert view["capabilities"] == ["product.query", "inventory.check"]
    assert view["status"] == "unknown"  # until the probe sent at registration answers
    wait_until(
        lambda: http.get("/v1/agents/product-assistant-01").json()["status"] == "healthy",
        "the probe sent at registration to pass",
    )
    listed = http.get("/v1/agents").json()["agents"]
    assert [a["id"] for a in listed] == ["product-assistant-01"]
    assert listed[0]["display_name"] == "商品助手"
    assert listed[0]["stats"]["in_flight"] == 0
    caps = http.get("/v1/capabilities").json()["capabilities"]
    assert caps == {
        "inventory.check": ["product-assistant-01"],
        "product.query": ["product-assistant-01"],
    }


def test_reregistering_replaces_the_capabilities(http, register, fake_agents):
    _, endpoint = fake_agents()
    register("a-1", endpoint, "one")
    register("a-1", endpoint, "two")
    assert http.get("/v1/capabilities").json()["capabilities"] == {"two": ["a-1"]}


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"id": "a", "capabilities": ["x"]}, 422, "validation_error"),
        (
            {"id": "a b", "capabilities": ["x"], "transport": {"endpoint": "http://127.0.0.1:1/"}},
            422,
            "validation_error",
        ),
        (
            {"id": "a", "capabilities": [], "transport": {"endpoint": "http://127.0.0.1:1/"}},
            422,
            "validation_error",
        ),
        (
            {"id": "a", "capabilities": ["bad tag!"], "transport": {"endpoint": "http://x/"}},
            422,
            "validation_error",
        ),
        (
            {"id": "a", "capabilities": ["x"], "transport": {"type": "smtp", "endpoint": "x"}},
            422,
            "validation_error",
        ),
        (
            {"id": "a", "capabilities": ["x"], "transport": {"endpoint": "ftp://127.0.0.1/"}},
            422,
            "endpoint_not_allowed",
        ),
        (
            {"id": "a", "capabilities": ["x"], "transport": {"endpoint": "http://u:p@127.0.0.1/"}},
            422,
            "endpoint_not_allowed",
        ),
        (
            {"id": "a", "capabilities": ["x"], "transport": {"endpoint": "http://h/\r\nX: y"}},
            422,
            "endpoint_not_allowed",
        ),
        (
            {
                "id": "a",
                "capabilities": ["x"],
                "timeout_class": "eternal",
                "transport": {"endpoint": "http://127.0.0.1:1/"},
            },
            422,
            "validation_error",
        ),
        (
            {
                "id": "a",
                "capabilities": ["x"],
                "ttl": 0,
                "transport": {"endpoint": "http://127.0.0.1:1/"},
            },
            422,
            "validation_error",
        ),
        ([1, 2], 422, "validation_error"),
    ],
)
def test_bad_registrations_get_a_clear_4xx_and_store_nothing(
    http, register, fake_agents, body, status, code
):
    _, endpoint = fake_agents()
    register("keeper", endpoint, "keep")
    response = http.post("/v1/agents", json=body)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert [a["id"] for a in http.get("/v1/agents").json()["agents"]] == ["keeper"]


def test_malformed_json_is_400_invalid_json(http):
    for path in ("/v1/agents", "/v1/route", "/v1/invoke"):
        response = http.post(path, content=b'{"id": ', headers={"content-type": "application/json"})
        assert response.status_code == 400, (path, response.text)
        assert response.json()["error"]["code"] == "invalid_json"


def test_oversized_bodies_are_413(http):
    big = b'{"capability": "x", "payload": "' + b"a" * (2 << 20) + b'"}'
    for path in ("/v1/agents", "/v1/invoke"):
        response = http.post(path, content=big, headers={"content-type": "application/json"})
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "payload_too_large"


def test_heartbeat_renews_and_unknown_ids_get_404(http, register, fake_agents):
    _, endpoint = fake_agents()
    register("a-1", endpoint, ttl=30)
    response = http.post("/v1/agents/a-1/heartbeat")
    assert response.status_code == 200
    assert response.json() == {"id": "a-1", "ttl": 30.0}
    missing = http.post("/v1/agents/nobody/heartbeat")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "unknown_agent"


def test_deregister_takes_the_instance_out_at_once(http, register, fake_agents):
    _, endpoint = fake_agents()
    register("a-1", endpoint, "echo")
    assert http.delete("/v1/agents/a-1").status_code == 204
    response = http.post("/v1/invoke", json={"capability": "echo"})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "no_capability"
    assert http.delete("/v1/agents/a-1").status_code == 404


def test_route_explains_every_factor_and_invokes_nothing(http, register, fake_agents):
    agent, endpoint = fake_agents()
    register("inv-1", endpoint, "inventory.check")
    register("inv-2", endpoint, "inventory.check", weight=0.5)
    wait_all_healthy(http)
    decision = http.post("/v1/route", json={"capability": "inventory.check"}).json()
    assert decision["agent_id"] == "inv-1"
    assert decision["capability"] == "inventory.check"
    assert decision["rule"] == "exact"
    assert decision["weights"] == {
        "match": 0.3,
        "health": 0.25,
        "affinity": 0.2,
        "load": 0.15,
        "success": 0.1,
        "quality": 0.3,
    }
    assert len(decision["policy_version"]) == 12
    by_id = {c["agent_id"]: c for c in decision["candidates"]}
    assert set(by_id) == {"inv-1", "inv-2"}
    for candidate in by_id.values():
        assert set(candidate["factors"]) == {
            "match",
            "health",
            "affinity",
            "load",
            "success",
            "latency",
            "quality",
        }
        assert candidate["match"] == {"exact": 1.0}
        assert candidate["factors"]["quality"] == 1.0  # no evidence against it yet
    # every factor 1 but affinity (no context): (1.30 - 0.20) / 1.30, the weights' total
    assert by_id["inv-1"]["score"] == pytest.approx(1.1 / 1.3, abs=1e-6)
    assert by_id["inv-2"]["score"] == pytest.approx(0.55 / 1.3, abs=1e-6)  # its weight 0.5
    assert agent.received == []


def test_route_and_invoke_agree_on_an_unknown_capability(http):
    routed = http.post("/v1/route", json={"capability": "nobody.home"})
    invoked = http.post("/v1/invoke", json={"capability": "nobody.home"})
    assert (routed.status_code, routed.json()["error"]["code"]) == (404, "no_capability")
    assert (invoked.status_code, invoked.json()["error"]["code"]) == (404, "no_capability")
    decision = routed.json()["error"]["route"]
    assert (decision["agent_id"], decision["rule"]) == (None, "no_match")


def test_invoke_delivers_the_contract_body_and_headers(http, register, fake_agents):
    agent, endpoint = fake_agents(answer={"in_stock": True, "说明": "有货"})
    register("inv-1", endpoint, "inventory.check")
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    response = http.post(
        "/v1/invoke",
        json={
            "capability": "inventory.check",
            "payload": {"sku": "P-1", "问": "有蓝色吗"},
            "request_id": "req-42",
            "max_hop": 3,
        },
        headers={"traceparent": parent},
    )
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["status"] == "ok"
    assert answer["request_id"] == "req-42"
    assert answer["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert answer["agent_id"] == "inv-1"
    assert answer["result"] == {"in_stock": True, "说明": "有货"}
    assert answer["route"]["agent_id"] == "inv-1"
    assert [a["outcome"] for a in answer["attempts"]] == ["ok"]
    [received] = agent.received
    assert received.body == {
        "request_id": "req-42",
        "capability": "inventory.check",
        "payload": {"sku": "P-1", "问": "有蓝色吗"},
        "context": None,
        "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "hop": 2,
    }
    assert received.headers["x-request-id"] == "req-42"
    assert received.headers["x-reach-hop"] == "2"
    assert received.headers["traceparent"].startswith("00-0af7651916cd43dd8448eb211c80319c-")
    assert received.headers["traceparent"] != parent


def test_invoke_without_request_id_gets_a_fresh_one_each_time(http, register, fake_agents):
    agent, endpoint = fake_agents()
    register("a-1", endpoint, "echo")
    ids = {
        http.post("/v1/invoke", json={"capability": "echo"}).json()["request_id"] for _ in range(3)
    }
    assert len(ids) == 3
    assert {r.body["request_id"] for r in agent.received} == ids


@pytest.mark.parametrize(
    ("knobs", "code"),
    [
        ({"status": 404}, "agent_error"),
        ({"status": 500, "headers": {"x-reach-retryable": "false"}}, "agent_error"),
        ({"raw_answer": b"<html>not json</html>"}, "agent_bad_answer"),
    ],
)
def test_failures_the_agent_made_final_are_502_with_a_code(
    http, register, fake_agents, knobs, code
):
    agent, endpoint = fake_agents(**knobs)
    register("a-1", endpoint, "echo")
    response = http.post("/v1/invoke", json={"capability": "echo", "request_id": "r-1"})
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == code
    assert error["request_id"] == "r-1"
    assert error["attempts"][0]["agent_id"] == "a-1"
    assert error["attempts"][0]["outcome"] == code
    assert len(agent.received) == 1


def test_an_only_instance_answering_503_suspends_the_request(http, register, fake_agents):
    _, endpoint = fake_agents(status=503)  # "not taken": the request may wait for a replay
    register("a-1", endpoint, "echo")
    response = http.post("/v1/invoke", json={"capability": "echo", "request_id": "r-2"})
    assert response.status_code == 202
    accepted = response.json()
    assert accepted["status"] == "suspended"
    assert accepted["poll"] == "/v1/tasks/r-2"
    assert http.get("/v1/tasks/r-2").json()["status"] == "suspended"


def test_an_only_instance_answering_500_is_that_failure_never_a_suspension(
    http, register, fake_agents
):
    agent, endpoint = fake_agents(status=500)  # it may have acted before failing
    register("a-1", endpoint, "echo")
    response = http.post("/v1/invoke", json={"capability": "echo", "request_id": "r-3"})
    assert response.status_code == 502
    assert response.json()["error"]["http_status"] == 500
    assert http.get("/v1/tasks/r-3").status_code == 404
    assert len(agent.received) == 1


def test_unreachable_only_agent_suspends_the_request(http, register):
    register("ghost", "http://127.0.0.1:9/invoke", "echo")
    response = http.post("/v1/invoke", json={"capability": "echo"})
    assert response.status_code == 202
    assert response.json()["status"] == "suspended"


def test_unknown_capability_is_404_no_capability(http):
    response = http.post("/v1/invoke", json={"capability": "nobody.home"})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "no_capability"


@pytest.mark.parametrize(
    ("body", "headers", "status", "code"),
    [
        ({}, {}, 422, "validation_error"),
        ({"capability": "echo", "max_hop": -1}, {}, 422, "validation_error"),
        ({"capability": "echo", "mystery": 1}, {}, 422, "validation_error"),
        ({"capability": "echo", "timeout_class": "eternal"}, {}, 422, "validation_error"),
        # JSON allows any integer; a delivery carries 64-bit ones
        ({"capability": "echo", "payload": {"n": [2**64]}}, {}, 422, "validation_error"),
        ({"capability": "echo"}, {"x-reach-hop": "many"}, 400, "invalid_hop"),
        ({"capability": "echo"}, {"x-reach-hop": "0"}, 508, "hop_limit"),
        ({"capability": "echo", "max_hop": 0}, {}, 508, "hop_limit"),
    ],
)
def test_bad_invocations_get_a_clear_error_and_reach_no_agent(
    http, register, fake_agents, body, headers, status, code
):
    agent, endpoint = fake_agents()
    register("a-1", endpoint, "echo")
    response = http.post("/v1/invoke", json=body, headers=headers)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert agent.received == []


def test_a_payload_no_agent_could_read_says_where_and_why(http, register, fake_agents):
    agent, endpoint = fake_agents()
    register("a-1", endpoint, "echo")
    response = http.post("/v1/invoke", json={"capability": "echo", "payload": {"n": 2**64}})
    assert response.status_code == 422
    [problem] = response.json()["error"]["problems"]
    assert problem["field"] == "payload"
    assert "cannot be delivered as JSON: Integer exceeds 64-bit range" in problem["problem"]
    assert agent.received == []
    assert http.post(
        "/v1/invoke", json={"capability": "echo", "payload": {"n": 2**63 - 1}}
    ).is_success
    assert [d.body["payload"] for d in agent.received] == [{"n": 2**63 - 1}]


def test_unknown_paths_and_methods_answer_json_errors(http):
    assert http.get("/v1/nothing").json()["error"]["code"] == "not_found"
    response = http.put("/v1/agents")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_healthz_and_openapi(http, settings):
    health = http.get("/healthz").json()
    assert health["status"] == "ok"
    assert health["backend"] == settings.registry_backend
    paths = http.get("/openapi.json").json()["paths"]
    assert {"/v1/agents", "/v1/route", "/v1/invoke", "/healthz"} <= set(paths)
