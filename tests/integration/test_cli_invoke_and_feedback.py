"""`agent-reach invoke --text` and `agent-reach feedback`, against a real coordinator and
real SDK agents on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner, Result

from agent_reach import Agent, AgentRequest
from agent_reach.cli import app
from agent_reach.config import Settings
from agent_reach.testing.servers import ServerThread, run_coordinator
from agent_reach.testing.waiting import wait_until

# Two capabilities with what their users say: each text below fits one of them.
CARDS = {
    "inventory.check": (
        "stock-01",
        "stock levels: is an item in stock, how many are left",
        ["is the blue phone in stock", "how many are left in stock", "check the inventory"],
    ),
    "order.query": (
        "order-01",
        "order status: shipped or not, what an order contains",
        ["where is my order", "has my order shipped", "what is in my order"],
    ),
}


@pytest.fixture(scope="module")
def coordinator() -> Iterator[str]:
    """A coordinator with one SDK agent per card, each answering with the text it got,
    once its text matchers have fitted the catalog (one for the module: that takes
    seconds)."""
    with run_coordinator(Settings(decision_log="off")) as (url, _), ExitStack() as stack:
        for capability, (agent_id, description, examples) in CARDS.items():
            agent = Agent(
                agent_id,
                [capability],
                coordinator_url=url,
                description=description,
                examples=examples,
            )

            @agent.handler
            async def answer(request: AgentRequest, agent_id: str = agent_id) -> dict[str, Any]:
                return {"by": agent_id, "text": request.text}

            server = ServerThread(agent.app)
            agent.endpoint_url = f"{server.url}/invoke"  # registers as it starts
            stack.enter_context(server)
        with httpx.Client(base_url=url) as http:
            wait_until(
                lambda: all(
                    http.get(f"/v1/agents/{agent_id}").status_code == 200
                    for agent_id, _, _ in CARDS.values()
                ),
                "registration",
            )
            # the text matchers fit the catalog in the background: wait, as a user would
            wait_until(
                lambda: http.get("/v1/policy").json()["matching"]["current"],
                "the text matchers to fit the catalog",
                timeout_s=30,
            )
        yield url


def run(*args: str, coordinator: str) -> Result:
    return CliRunner().invoke(app, [*args, "--coordinator", coordinator], env={"COLUMNS": "80"})


def test_invoke_text_routes_by_meaning_and_the_agent_gets_the_words(coordinator: str) -> None:
    result = run("invoke", "--text", "is the blue phone in stock", coordinator=coordinator)

    assert result.exit_code == 0, result.output
    assert "from stock-01 for inventory.check" in result.output
    assert '"text": "is the blue phone in stock"' in result.output


def test_invoke_needs_a_capability_or_a_text(coordinator: str) -> None:
    result = run("invoke", coordinator=coordinator)

    assert result.exit_code == 1
    assert "invalid_arguments" in result.output and "--text" in result.output


def test_feedback_teaches_the_router_the_capability_a_text_should_have_reached(
    coordinator: str,
) -> None:
    with httpx.Client(base_url=coordinator, timeout=10) as http:
        routed = http.post(
            "/v1/invoke", json={"text": "check the inventory of my order", "request_id": "fb-1"}
        )
        assert routed.status_code == 200, routed.text

        result = run("feedback", "fb-1", "order.query", coordinator=coordinator)
        learned = http.get("/v1/routing/learned").json()["examples"]

    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "learned example" in out and "→ order.query" in out
    assert "check the inventory of my order" in out
    assert [(e["request_id"], e["capability"]) for e in learned] == [("fb-1", "order.query")]


def test_feedback_for_an_unknown_request_exits_1_with_its_code(coordinator: str) -> None:
    result = run("feedback", "never-sent", "order.query", coordinator=coordinator)

    assert result.exit_code == 1
    assert "unknown_request" in result.output


def test_feedback_rating_rates_the_answer_for_the_agent_that_gave_it(coordinator: str) -> None:
    with httpx.Client(base_url=coordinator, timeout=10) as http:
        answered = http.post(
            "/v1/invoke", json={"capability": "order.query", "payload": {}, "request_id": "rt-1"}
        )
        assert answered.status_code == 200, answered.text
        agent_id = answered.json()["agent_id"]

        result = run("feedback", "rt-1", "--rating", "bad", coordinator=coordinator)
        again = run("feedback", "rt-1", "--rating", "good", coordinator=coordinator)
        agents = {a["id"]: a for a in http.get("/v1/agents").json()["agents"]}

    assert result.exit_code == 0, result.output
    assert f"rated rt-1 bad for {agent_id}" in " ".join(result.output.split())
    assert agents[agent_id]["quality"]["outcomes"].get("bad") == 1
    assert again.exit_code == 1 and "already_rated" in again.output
    neither = run("feedback", "rt-1", coordinator=coordinator)
    assert neither.exit_code == 1 and "--rating" in neither.output
