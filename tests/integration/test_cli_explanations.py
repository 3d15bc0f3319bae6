"""`route`, `why` and `invoke` as a user reads them at 80 and 100 columns: every
threshold with the comparison that held, no `x ≥ y` with x < y, ids and numbers with
their units on one line, no space at a line's end.

A real coordinator on loopback (memory and Redis), real registrations; the CLI runs
through Typer's runner with COLUMNS set.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner, Result

from agent_reach.cli import app

COMPARISON = re.compile(r"(\d+\.\d+) ([≥<]) (\d+\.\d+)")
WIDTHS = ("80", "100")
CARDS = {  # two capabilities the text below fits about equally
    "order.status": ("where an order is, has it shipped", ["where is my order"]),
    "order.track": ("track a parcel of an order", ["track my order"]),
}


def run(columns: str, *args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": columns})


def assert_reads_right(output: str) -> None:
    """No trailing space, and every printed comparison true as printed."""
    assert [line for line in output.splitlines() if line != line.rstrip()] == [], output
    for a, relation, b in COMPARISON.findall(output):
        assert (float(a) >= float(b)) == (relation == "≥"), output


def register(http: httpx.Client, agent_id: str, capability: str, endpoint: str) -> None:
    description, examples = CARDS.get(capability, ("", []))
    body = {
        "id": agent_id,
        "capabilities": [capability],
        "description": description,
        "examples": examples,
        "transport": {"type": "http", "endpoint": endpoint},
    }
    assert http.post("/v1/agents", json=body).status_code == 201


@pytest.mark.parametrize("columns", WIDTHS)
def test_a_refusal_states_the_comparison_that_held(
    coordinator: str, http: httpx.Client, dead_port: int, columns: str
) -> None:
    endpoint = f"http://127.0.0.1:{dead_port}/invoke"
    register(http, "order-status-shanghai-01", "order.status", endpoint)
    register(http, "order-track-shanghai-01", "order.track", endpoint)
    decision = http.post("/v1/route", json={"text": "book me a flight to Mars"}).json()
    assert decision["rule"] in ("no_match", "margin"), decision
    [refusing] = [t for t in decision["thresholds"] if t["reached"] and not t["passed"]]
    assert re.search(
        r"\d\.\d+ < \d\.\d+ \((min_confidence|margin)\): refused", refusing["statement"]
    )

    result = run(columns, "route", "book me a flight to Mars", "--coordinator", coordinator)

    assert result.exit_code == 0, result.output
    assert_reads_right(result.output)
    lines = result.output.splitlines()
    held = re.search(r"(confidence|capability) \d\.\d+ < \d\.\d+", refusing["statement"])
    assert held is not None
    assert any(held[0] in line for line in lines), result.output  # never split
    assert "not chosen: " + refusing["statement"] in " ".join(result.output.split())
    for candidate in decision["candidates"]:  # each id and its score on its title's line
        assert any(
            f"{candidate['agent_id']}  score {candidate['score']:.3f}" in line for line in lines
        ), result.output


@pytest.mark.parametrize("columns", WIDTHS)
def test_why_of_an_unreachable_agent_says_unreachable_with_its_ids_whole(
    coordinator: str, http: httpx.Client, dead_port: int, columns: str
) -> None:
    register(http, "refund-ghost", "refund.issue", f"http://127.0.0.1:{dead_port}/invoke")
    answer = http.post(
        "/v1/invoke",
        json={"capability": "refund.issue", "request_id": "ghost-1", "suspend": False},
    )
    assert answer.status_code == 503, answer.text
    trace_id = answer.json()["error"]["trace_id"]
    walked = http.get("/v1/requests/ghost-1/why").json()
    registry = next(s for s in walked["steps"] if s["step"] == "registry")
    assert registry["verdict"] == "unreachable", walked

    result = run(columns, "why", "ghost-1", "--coordinator", coordinator)

    assert result.exit_code == 0, result.output
    assert_reads_right(result.output)
    lines = result.output.splitlines()
    assert any(f"trace {trace_id}" in line for line in lines), result.output
    assert re.search(r"registry\s*│\s*unreachable\s*│", result.output), result.output
    assert not re.search(r"registry\s*│\s*ok\s*│", result.output)
    assert re.search(r"\d+\.\d ms", result.output)  # the duration with its unit
    assert "first wrong step: registry" in " ".join(result.output.split())


@pytest.mark.parametrize("columns", WIDTHS)
def test_trace_keeps_each_offset_with_its_unit(
    coordinator: str, http: httpx.Client, dead_port: int, columns: str
) -> None:
    register(http, "refund-ghost", "refund.issue", f"http://127.0.0.1:{dead_port}/invoke")
    answer = http.post("/v1/invoke", json={"capability": "refund.issue", "suspend": False})
    trace_id = answer.json()["error"]["trace_id"]

    result = run(columns, "trace", trace_id, "--coordinator", coordinator)

    assert result.exit_code == 0, result.output
    assert_reads_right(result.output)
    assert any(f"trace {trace_id}" in line for line in result.output.splitlines())
    assert re.search(r"\+\d+\.\d\d ms", result.output), result.output
    assert not re.search(r"\d\s*\n\s*(│\s*)*ms\b", result.output), result.output


def test_invoke_sends_every_option_of_the_api(
    coordinator: str, http: httpx.Client, fake_agents
) -> None:
    agent, endpoint = fake_agents()
    register(http, "echo-01", "echo.say", endpoint)
    context = http.post("/v1/contexts", json={"document": {"topic": "x"}}).json()

    args = (
        "100",
        "invoke",
        "echo.say",
        "--payload",
        '{"n": 1}',
        "--request-id",
        "cli-opt-1",
        "--context-id",
        context["context_id"],
        "--budget",
        "7",
        "--max-hop",
        "3",
        "--timeout-class",
        "reasoning",
        "--no-suspend",
        "--on-duplicate",
        "reject",
        "--coordinator",
        coordinator,
    )
    result = run(*args)

    assert result.exit_code == 0, result.output
    assert "request cli-opt-1" in result.output
    assert len(agent.received) == 1
    walked = http.get("/v1/requests/cli-opt-1/why").json()
    assert walked["request_id"] == "cli-opt-1"
    assert step_context(walked) == context["context_id"]
    bad = run("100", "invoke", "echo.say", "--max-hop", "99", "--coordinator", coordinator)
    assert bad.exit_code == 2  # refused before anything is sent


def step_context(walked: dict[str, Any]) -> str | None:
    return next(s for s in walked["steps"] if s["step"] == "context")["context_id"]


def test_invoke_passes_the_callers_deadline_and_reports_its_expiry(
    coordinator: str, http: httpx.Client, gated_agents
) -> None:
    agent, endpoint = gated_agents()  # holds its answer until the test lets it go
    register(http, "slow-01", "report.build", endpoint)

    result = run(
        "100",
        "invoke",
        "report.build",
        "--deadline-ms",
        "300",
        "--no-suspend",
        "--coordinator",
        coordinator,
    )

    assert result.exit_code == 1, result.output
    # the attempt had the 300 ms the caller gave, not the query class's 2 s
    assert re.search(r"agent_timeout: no answer within 0\.[0-3]\d* s", result.output), result.output
    assert len(agent.received) == 1  # delivered once, then given up on at the deadline
