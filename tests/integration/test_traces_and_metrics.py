"""Traces across hops and agents, the trace and decision APIs, metrics and `/ui`, both backends."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client.parser import text_string_to_metric_families

from agent_reach import Agent, AgentRequest
from agent_reach.clock import ManualClock
from agent_reach.config import Settings
from agent_reach.testing.fake_agent import FakeAgent, Scope
from agent_reach.testing.servers import ServerThread, run_coordinator
from agent_reach.testing.waiting import wait_all_healthy, wait_until

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
POLICY = """
[timeout_classes.quick]
timeout_s = 1.0
retries = 1

[delivery]
backoff_s = [0.05]
"""


@pytest.fixture
def coordinator(settings: Settings, tmp_path) -> Iterator[str]:
    """A coordinator whose `quick` class re-sends a timed-out request once, after 50 ms."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    with run_coordinator(settings.model_copy(update={"policy_file": policy})) as (url, _):
        yield url


def invoke(http: httpx.Client, capability: str = "echo", **extra: Any) -> httpx.Response:
    headers = extra.pop("headers", None)
    return http.post("/v1/invoke", json={"capability": capability, **extra}, headers=headers)


def spans_of(http: httpx.Client, trace_id: str) -> list[dict[str, Any]]:
    response = http.get(f"/v1/traces/{trace_id}")
    assert response.status_code == 200, response.text
    return response.json()["spans"]


def only(spans: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["kind"] == kind]


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample of a Prometheus exposition; 0 when it is not there yet."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


def test_a_callers_traceparent_is_continued_through_every_hop(http, register, fake_agents):
    agent, endpoint = fake_agents()
    register("a-1", endpoint, "echo")
    response = invoke(http, headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"})
    assert response.headers["x-trace-id"] == CALLER_TRACE
    spans = spans_of(http, CALLER_TRACE)
    [root] = only(spans, "invoke")
    [route] = only(spans, "route")
    [attempt] = only(spans, "attempt")
    assert root["parent_id"] == CALLER_SPAN
    assert route["parent_id"] == attempt["parent_id"] == root["span_id"]
    assert (route["status"], route["agent_id"], route["note"]) == ("ok", "a-1", "exact")
    delivered = agent.received[0].headers["traceparent"]
    assert delivered == f"00-{CALLER_TRACE}-{attempt['span_id']}-01"


def test_a_request_without_traceparent_starts_a_new_trace(http, register, fake_agents):
    _, endpoint = fake_agents()
    register("a-1", endpoint, "echo")
    first = invoke(http).json()["trace_id"]
    second = invoke(http).json()["trace_id"]
    assert first != second
    [root] = only(spans_of(http, first), "invoke")
    assert root["parent_id"] is None
    assert (root["name"], root["status"], root["agent_id"]) == ("echo", "ok", "a-1")


def test_every_attempt_is_a_span_with_agent_number_status_and_timings(http, register, fake_agents):
    _, bad_endpoint = fake_agents(status=503)
    _, good_endpoint = fake_agents()
    register("bad-1", bad_endpoint, "echo", weight=2.0)
    register("good-1", good_endpoint, "echo")
    wait_all_healthy(http)
    answer = invoke(http).json()
    spans = spans_of(http, answer["trace_id"])
    attempts = only(spans, "attempt")
    assert [(a["agent_id"], a["attempt"], a["status"], a["note"]) for a in attempts] == [
        ("bad-1", 1, "agent_error", None),
        ("good-1", 2, "ok", "next_instance"),
    ]
    assert attempts[0]["is_error"] and not attempts[1]["is_error"]
    assert all(a["duration_ms"] > 0 for a in attempts)
    assert attempts[1]["offset_ms"] >= attempts[0]["offset_ms"] + attempts[0]["duration_ms"]
    [root] = only(spans, "invoke")
    assert (root["status"], root["agent_id"]) == ("fallback", "good-1")
    assert root["duration_ms"] >= sum(a["duration_ms"] for a in attempts)


def test_a_timed_out_attempt_and_its_resend_are_both_in_the_trace(http, register, fake_agents):
    _, slow_endpoint = fake_agents(delay_s=3.0)
    _, fast_endpoint = fake_agents()
    register("slow-1", slow_endpoint, "echo", timeout_class="quick", weight=2.0)
    register("fast-1", fast_endpoint, "echo", timeout_class="quick")
    wait_all_healthy(http)
    answer = invoke(http).json()
    attempts = only(spans_of(http, answer["trace_id"]), "attempt")
    assert [(a["agent_id"], a["status"]) for a in attempts] == [
        ("slow-1", "agent_timeout"),
        ("fast-1", "ok"),
    ]
    summary = http.get(f"/v1/traces/{answer['trace_id']}").json()["summary"]
    assert (summary["attempts"], summary["retries"], summary["status"]) == (2, 1, "fallback")


def test_a_nested_call_made_by_an_agent_joins_the_same_trace(
    http, register, fake_agents, coordinator
):
    back, back_endpoint = fake_agents(answer={"answer": "有货"})
    register("back-1", back_endpoint, "stock.check")
    front = Agent("front-1", ["order.status"], coordinator_url=coordinator)

    @front.handler
    async def status(request: AgentRequest) -> dict[str, Any]:
        stock = await request.client.invoke("stock.check", payload=request.payload)
        return {"stock": stock.result}

    server = ServerThread(front.app)
    front.endpoint_url = f"{server.url}/invoke"
    with server:
        wait_until(lambda: http.get("/v1/agents/front-1").status_code == 200, "front-1 to register")
        answer = invoke(http, "order.status", payload={"sku": "X"}).json()
    assert answer["result"] == {"stock": {"answer": "有货"}}
    spans = spans_of(http, answer["trace_id"])
    outer, nested = sorted(only(spans, "invoke"), key=lambda s: s["offset_ms"])
    front_attempt = next(s for s in spans if s["kind"] == "attempt" and s["agent_id"] == "front-1")
    back_attempt = next(s for s in spans if s["kind"] == "attempt" and s["agent_id"] == "back-1")
    assert outer["parent_id"] is None
    assert front_attempt["parent_id"] == outer["span_id"]
    assert nested["parent_id"] == front_attempt["span_id"]
    assert back_attempt["parent_id"] == nested["span_id"]
    assert back.received[0].body["trace_id"] == answer["trace_id"]
    [listed] = http.get("/v1/traces", params={"capability": "stock.check"}).json()["traces"]
    assert (listed["trace_id"], listed["capability"], listed["spans"]) == (
        answer["trace_id"],
        "order.status",
        6,
    )


class TakesManualTime(FakeAgent):
    """A FakeAgent that moves its coordinator's manual clock on by `seconds` per request:
    the request lasts exactly that long to the coordinator, however fast the machine."""

    def __init__(self, clock: ManualClock, seconds: float) -> None:
        super().__init__()
        self.clock, self.seconds = clock, seconds

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            self.clock.advance(self.seconds)
        await FakeAgent.__call__(self, scope, receive, send)


def test_the_trace_list_filters_by_capability_outcome_agent_and_duration(settings, fake_agents):
    # On a manual clock the fast requests take 0 ms and the slow one 150: on the real clock
    # a fast request slower than 100 ms (a loaded machine) was listed as slow too.
    clock = ManualClock()
    _, fast_endpoint = fake_agents()
    with (
        run_coordinator(settings, clock) as (url, _),
        httpx.Client(base_url=url) as http,
        ServerThread(TakesManualTime(clock, 0.15)) as slow_server,
    ):
        for agent_id, endpoint, capability in (
            ("fast-1", fast_endpoint, "fast"),
            ("slow-1", f"{slow_server.url}/invoke", "slow"),
        ):
            body = {
                "id": agent_id,
                "capabilities": [capability],
                "transport": {"endpoint": endpoint},
            }
            assert http.post("/v1/agents", json=body).status_code == 201
        fast = invoke(http, "fast").json()["trace_id"]
        slow = invoke(http, "slow").json()["trace_id"]
        missing = invoke(http, "nobody.offers").json()["error"]["trace_id"]

        def listed(**params: Any) -> list[str]:
            traces = http.get("/v1/traces", params=params).json()["traces"]
            return [t["trace_id"] for t in traces]

        assert listed() == [missing, slow, fast]  # newest first
        assert listed(capability="fast") == [fast]
        assert listed(agent_id="slow-1") == [slow]
        assert listed(status="error") == [missing]
        assert listed(status="no_capability") == [missing]
        assert listed(status="ok") == [slow, fast]
        assert listed(min_ms=100) == [slow]
        assert listed(limit=1) == [missing]
        assert http.get("/v1/traces", params={"min_ms": -1}).status_code == 422


def test_unknown_traces_are_404_and_the_oldest_are_evicted(settings, fake_agents):
    small = settings.model_copy(update={"trace_store_size": 2})
    _, endpoint = fake_agents()
    registration = {"id": "a-1", "capabilities": ["echo"], "transport": {"endpoint": endpoint}}
    with run_coordinator(small) as (url, _), httpx.Client(base_url=url) as http:
        http.post("/v1/agents", json=registration)
        traces = [invoke(http).json()["trace_id"] for _ in range(3)]
        assert http.get(f"/v1/traces/{traces[0]}").json()["error"]["code"] == "unknown_trace"
        assert http.get(f"/v1/traces/{traces[0]}").status_code == 404
        assert [t["trace_id"] for t in http.get("/v1/traces").json()["traces"]] == traces[:0:-1]


def test_recent_decisions_are_listed_with_candidates_by_trace_and_agent(
    http, register, fake_agents
):
    _, endpoint = fake_agents()
    register("a-1", endpoint, "echo")
    register("a-2", endpoint, "echo")
    trace_id = invoke(http).json()["trace_id"]
    http.post("/v1/route", json={"capability": "echo"})
    decisions = http.get("/v1/decisions").json()["decisions"]
    assert [d["kind"] for d in decisions] == ["route", "invoke"]
    [mine] = http.get("/v1/decisions", params={"trace_id": trace_id}).json()["decisions"]
    assert mine["decision"]["capability"] == "echo"
    assert {c["agent_id"] for c in mine["decision"]["candidates"]} == {"a-1", "a-2"}
    assert set(mine["decision"]["candidates"][0]["factors"]) >= {"health", "load"}
    assert len(http.get("/v1/decisions", params={"agent_id": "a-2"}).json()["decisions"]) == 2
    assert http.get("/v1/decisions", params={"agent_id": "zz"}).json()["decisions"] == []


def test_metrics_count_requests_latencies_retries_fallbacks_and_states(http, register, fake_agents):
    _, bad_endpoint = fake_agents(status=503)
    _, good_endpoint = fake_agents()
    register("bad-1", bad_endpoint, "echo", weight=2.0)
    register("good-1", good_endpoint, "echo")
    wait_all_healthy(http)
    before = http.get("/metrics").text
    assert invoke(http).json()["status"] == "fallback"
    assert invoke(http, "nobody.offers").status_code == 404
    after = http.get("/metrics").text

    def grew(name: str, **labels: str) -> float:
        return metric(after, name, **labels) - metric(before, name, **labels)

    assert grew("agent_reach_requests_total", capability="echo", status="fallback") == 1
    assert grew("agent_reach_requests_total", capability="(unknown)", status="error") == 1
    assert grew("agent_reach_request_seconds_count", capability="echo") == 1
    assert grew("agent_reach_route_seconds_count") == 2
    assert grew("agent_reach_attempt_seconds_count", outcome="agent_error") == 1
    assert grew("agent_reach_attempt_seconds_count", outcome="ok") == 1
    assert grew("agent_reach_retries_total", kind="next_instance") == 1
    assert grew("agent_reach_fallbacks_total", stage="next_instance") == 1
    assert metric(after, "agent_reach_instances", state="healthy") == 2
    assert metric(after, "agent_reach_instances", state="offline") == 0
    assert metric(after, "agent_reach_queue_depth", queue="suspended") == 0
    assert metric(after, "agent_reach_queue_depth", queue="deadletters") == 0


def test_queue_depths_follow_suspended_requests(http, register, fake_agents):
    _, endpoint = fake_agents(status=503)
    register("down-1", endpoint, "echo")
    # healthy first: its probe passing after the suspension would replay the request
    wait_until(lambda: http.get("/v1/agents/down-1").json()["status"] == "healthy", "a probe")
    assert http.get("/v1/queues").json() == {"work": 0, "suspended": 0, "deadletters": 0}
    parked = invoke(http)
    assert parked.status_code == 202
    assert http.get("/v1/queues").json()["suspended"] == 1
    assert metric(http.get("/metrics").text, "agent_reach_queue_depth", queue="suspended") == 1
    [listed] = http.get("/v1/traces", params={"status": "suspended"}).json()["traces"]
    assert listed["trace_id"] == parked.json()["trace_id"]


def test_the_dashboard_is_served_with_a_strict_policy_and_reads_only(http):
    redirect = http.get("/ui")
    assert (redirect.status_code, redirect.headers["location"]) == (308, "/ui/")
    page = http.get("/ui/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    assert page.headers["x-frame-options"] == "DENY"
    assert '<script type="module" src="js/app.js">' in page.text
    script = http.get("/ui/js/app.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert http.post("/ui/").status_code == 405
    assert http.get("/ui/missing.js").status_code == 404


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that keeps every export request it receives."""

    received: list[bytes]

    def do_POST(self) -> None:
        self.received.append(self.rfile.read(int(self.headers["content-length"])))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, list[bytes]]]:
    received: list[bytes] = []
    handler = type("Collector", (_Collector,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", received
    server.shutdown()
    server.server_close()


def test_spans_are_exported_over_otlp_with_the_ids_agents_saw(fake_agents, collector):
    endpoint_url, received = collector
    agent, endpoint = fake_agents()
    settings = Settings(decision_log="off", otlp_endpoint=endpoint_url)
    with run_coordinator(settings) as (url, _), httpx.Client(base_url=url) as http:
        http.post("/v1/agents", json={"id": "a-1", "capabilities": ["echo"],
                                      "transport": {"endpoint": endpoint}})  # fmt: skip
        invoke(http, headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"})

        def exported() -> dict[str, Any]:
            spans = {}
            for body in list(received):
                for resource in ExportTraceServiceRequest.FromString(body).resource_spans:
                    for scope in resource.scope_spans:
                        spans.update({s.name: (resource, s) for s in scope.spans})
            return spans if len(spans) == 3 else {}

        spans = wait_until(exported, "the invoke, route and attempt spans at the collector")
    resource, attempt = spans["attempt echo"]
    _, root = spans["invoke echo"]
    assert {s.trace_id.hex() for _, s in spans.values()} == {CALLER_TRACE}
    assert root.parent_span_id.hex() == CALLER_SPAN
    assert attempt.parent_span_id == root.span_id
    traceparent = agent.received[0].headers["traceparent"]
    assert traceparent == f"00-{CALLER_TRACE}-{attempt.span_id.hex()}-01"
    attributes = {a.key: a.value for a in attempt.attributes}
    assert attributes["agent_reach.agent_id"].string_value == "a-1"
    assert attributes["agent_reach.attempt"].int_value == 1
    service = {a.key: a.value.string_value for a in resource.resource.attributes}
    assert service["service.name"] == "agent-reach"
