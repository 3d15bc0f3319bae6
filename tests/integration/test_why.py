"""`GET /v1/requests/{id}/why` and `agent-reach why`: one request walked step by step.

Real coordinators (memory and Redis), a real SDK agent that reads its context
projection, and FakeAgents that fail; each walk must name the step that went wrong.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from agent_reach import Agent, AgentRequest
from agent_reach.cli import app
from agent_reach.clock import ManualClock
from agent_reach.config import Settings
from agent_reach.testing.servers import ServerThread, run_coordinator
from agent_reach.testing.waiting import wait_all_healthy, wait_until

# The probe interval of `probed_by_hand`, in its manual clock's seconds: small next to
# the 60 s lease, so however many times a test moves the clock on, no lease runs out.
PROBE_S = 0.01


@pytest.fixture
def probed_by_hand(settings: Settings) -> Iterator[tuple[str, ManualClock]]:
    """A coordinator on a manual clock: an instance is probed only when the test moves the
    clock on by a probe interval, so its health stays where the test left it."""
    clock = ManualClock()
    probed = settings.model_copy(update={"probe_interval_s": PROBE_S})
    with run_coordinator(probed, clock) as (url, _):
        yield url, clock


def why(http: httpx.Client, request_id: str) -> dict[str, Any]:
    answer = http.get(f"/v1/requests/{request_id}/why")
    assert answer.status_code == 200, answer.text
    document: dict[str, Any] = answer.json()
    assert [s["step"] for s in document["steps"]] == ["routing", "registry", "context", "delivery"]
    return document


def step(document: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in document["steps"] if s["step"] == name)


def test_a_good_request_walks_clean_and_shows_the_context_the_agent_read(
    coordinator: str, http: httpx.Client
) -> None:
    agent = Agent(
        "order-01", ["order.status"], coordinator_url=coordinator, context_fields=["order"]
    )

    @agent.handler
    async def status(request: AgentRequest) -> dict[str, Any]:
        context = await request.context_data()
        return {"order": context["order"]["id"], "state": "shipped"}

    server = ServerThread(agent.app)
    agent.endpoint_url = f"{server.url}/invoke"
    with server:
        wait_all_healthy(http)  # registered and probed: health 1.0 in the decision below
        context = http.post(
            "/v1/contexts", json={"document": {"order": {"id": "A-17"}, "card": "4111"}}
        ).json()
        answer = http.post(
            "/v1/invoke",
            json={
                "capability": "order.status",
                "request_id": "why-ok-1",
                "context_id": context["context_id"],
            },
        )
        assert answer.status_code == 200, answer.text

        document = why(http, "why-ok-1")

    assert document["first_wrong_step"] is None, document["summary"]
    assert [s["verdict"] for s in document["steps"]] == ["ok"] * 4
    routing = step(document, "routing")
    assert routing["decision"]["agent_id"] == "order-01"
    assert routing["decision"]["candidates"][0]["factors"]["health"] == 1.0
    registry = step(document, "registry")
    assert registry["instances"][0]["role"] == "chosen"
    assert registry["instances"][0]["at_the_time"]["lease_left_s"] > 0
    reads = step(document, "context")["reads"]
    assert len(reads) == 1
    assert set(reads[0]["sizes"]) == {"order"}  # the projection: never the card
    assert reads[0]["values"] == {"order": {"id": "A-17"}}
    assert step(document, "delivery")["result"] == {"order": "A-17", "state": "shipped"}


def test_a_failing_agent_is_named_at_the_delivery_step(
    coordinator: str, http: httpx.Client, fake_agents, register
) -> None:
    agent, endpoint = fake_agents(status=500, headers={"X-Reach-Retryable": "false"})
    assert register("broken-01", endpoint, "pay.charge").status_code == 201

    answer = http.post("/v1/invoke", json={"capability": "pay.charge", "request_id": "why-500"})
    assert answer.status_code == 502, answer.text

    document = why(http, "why-500")
    assert document["first_wrong_step"] == "delivery", document["summary"]
    delivery = step(document, "delivery")
    assert delivery["verdict"] == "failed"
    assert delivery["error"]["code"] == "agent_error"
    assert [a["agent_id"] for a in delivery["attempts"]] == ["broken-01"]
    assert len(agent.received) == 1


def test_an_unroutable_request_stops_at_routing(http: httpx.Client) -> None:
    answer = http.post("/v1/invoke", json={"capability": "no.such", "request_id": "why-none"})
    assert answer.status_code == 404, answer.text

    document = why(http, "why-none")
    assert document["first_wrong_step"] == "routing"
    assert [s["verdict"] for s in document["steps"][1:]] == ["not_reached"] * 3


def test_an_agent_that_ignores_its_context_is_named_at_the_context_step(
    coordinator: str, http: httpx.Client, fake_agents, register
) -> None:
    _, endpoint = fake_agents()
    assert register("lazy-01", endpoint, "kb.search", context_fields=["topic"]).status_code == 201
    context = http.post("/v1/contexts", json={"document": {"topic": "returns"}}).json()

    http.post(
        "/v1/invoke",
        json={
            "capability": "kb.search",
            "request_id": "why-ctx",
            "context_id": context["context_id"],
        },
    )

    document = why(http, "why-ctx")
    assert document["first_wrong_step"] == "context", document["summary"]
    assert "did not read" in step(document, "context")["finding"]


def test_a_suspect_instance_is_named_at_the_registry_step_with_its_state_then(
    probed_by_hand: tuple[str, ManualClock], fake_agents
) -> None:
    url, clock = probed_by_hand
    agent, endpoint = fake_agents()
    with httpx.Client(base_url=url, timeout=10) as http:
        body = {
            "id": "sick-01",
            "capabilities": ["stock.check"],
            "transport": {"endpoint": endpoint},
        }
        assert http.post("/v1/agents", json=body).status_code == 201
        # Only an instance that has answered can turn suspect (before that it is unknown):
        # its registration probe passes, then its health checks start failing.
        wait_until(
            lambda: http.get("/v1/agents/sick-01").json()["status"] == "healthy",
            "the registration probe to answer",
        )
        agent.healthy = False

        def suspect_or_probe_again() -> bool:
            if http.get("/v1/agents/sick-01").json()["status"] == "suspect":
                return True
            clock.advance(PROBE_S)  # one probe due; more advances before it runs add none
            return False

        # 3 failed probes make it suspect and 5 take it offline. The clock stops once it
        # is suspect, so at most one more probe (one already due) fails before the request
        # is routed, however slow the machine: probing every 50 ms of real time, 2 more
        # could fail in the ~100 ms before the request was routed, and it went offline.
        wait_until(suspect_or_probe_again, "probes to make the instance suspect")
        answer = http.post(
            "/v1/invoke", json={"capability": "stock.check", "request_id": "why-sick"}
        )
        assert answer.status_code == 200, answer.text

        document = why(http, "why-sick")

    assert document["first_wrong_step"] == "registry", document["summary"]
    chosen = step(document, "registry")["instances"][0]
    assert chosen["health_factor"] == 0.5
    assert chosen["at_the_time"]["registered"] is True
    assert len(agent.received) == 1


def test_why_of_an_unknown_request_is_a_clear_404(http: httpx.Client) -> None:
    answer = http.get("/v1/requests/never-sent/why")
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "unknown_request"


def test_the_cli_prints_the_walk_in_order_and_names_the_wrong_step(
    coordinator: str, http: httpx.Client
) -> None:
    http.post("/v1/invoke", json={"capability": "no.such", "request_id": "why-cli"})

    result = CliRunner().invoke(app, ["why", "why-cli", "--coordinator", coordinator])

    assert result.exit_code == 0, result.output
    out = result.output
    positions = [out.index(name) for name in ("routing", "registry", "context", "delivery")]
    assert positions == sorted(positions)
    assert "first wrong step: routing" in out
