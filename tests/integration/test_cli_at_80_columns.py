"""`route`, `why` and every `--help` read whole in an 80-column terminal.

A real coordinator on loopback; the CLI runs with COLUMNS=80, and no line may be wider
than 80 cells nor any cell cut short with `…`. `route` prints a block per candidate;
`why` of a request suspended at a dead endpoint says it was routed, each attempt, and
why it waits; given a trace id, `why` walks the trace's requests.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import typer
from rich.cells import cell_len
from typer.testing import CliRunner, Result

from agent_reach.cli import app
from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator

NARROW = {"COLUMNS": "80"}
DEAD = "http://127.0.0.1:9/invoke"  # discard: nothing answers there
# A small customer-service catalog: what its customers say, per capability.
CARDS = {
    "order.query": ("订单状态、订单内容、发货进度", ["我的订单到哪一步了", "帮我查一下订单状态"]),
    "logistics.track": (
        "快递单号、物流轨迹、预计送达时间",
        ["我买的东西怎么还没到", "快递到哪了", "包裹什么时候能送到"],
    ),
    "faq.answer": ("产品功能、保修、退换货、发票等常见问题", ["怎么开发票", "保修多久"]),
}


@pytest.fixture
def coordinator() -> Iterator[str]:
    with run_coordinator(Settings(decision_log="off")) as (url, _):
        yield url


@pytest.fixture
def http(coordinator: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=coordinator, timeout=10) as client:
        yield client


def run(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env=NARROW)


def assert_fits(output: str) -> None:
    """No line wider than 80 cells, nothing cut with an ellipsis."""
    too_wide = [line for line in output.splitlines() if cell_len(line.rstrip()) > 80]
    assert too_wide == [], output
    assert "…" not in output, output


def test_route_prints_a_block_per_candidate_that_fits_80_columns(
    coordinator: str, http: httpx.Client
) -> None:
    for capability, (description, examples) in CARDS.items():
        instances = ("logistics-track-shanghai-01", "logistics-track-beijing-02")
        for agent_id in instances if capability == "logistics.track" else (capability + "-01",):
            body = {
                "id": agent_id,
                "capabilities": [capability],
                "description": description,
                "examples": examples,
                "transport": {"type": "http", "endpoint": DEAD},
            }
            assert http.post("/v1/agents", json=body).status_code == 201
    decision = http.post("/v1/route", json={"text": "我买的东西怎么还没到"}).json()

    result = run("route", "我买的东西怎么还没到", "--coordinator", coordinator)

    assert result.exit_code == 0, result.output
    assert_fits(result.output)
    out = result.output
    assert f"rule {decision['rule']}" in out and f"policy {decision['policy_version']}" in out
    titles = [line for line in out.splitlines() if re.match(r"^(→| ) \d+\. ", line)]
    assert len(titles) == len(decision["candidates"]) == 4
    for candidate in decision["candidates"]:  # equal scores may come in either order
        [title] = [t for t in titles if f" {candidate['agent_id']} " in t]
        assert f"{candidate['capability']} on {candidate['agent_id']}" in title
        assert f"score {candidate['score']:.3f}" in title
    [chosen] = [t for t in titles if t.startswith("→")]
    chosen_id = re.search(r"route: logistics\.track → (\S+)", out)
    assert chosen_id is not None and f"logistics.track on {chosen_id[1]}" in chosen
    first = decision["candidates"][0]
    assert f"confidence {first['factors']['match']:.3f}" in out
    for name, weight in decision["weights"].items():  # each factor × its weight
        value = first["factors"][name]
        assert f"{value:.3f} × {weight:.2f} = {value * weight:.3f}" in out
    assert "chosen by rule best" in out
    assert out.count("not chosen: ") == 3


def test_why_of_a_request_suspended_at_a_dead_endpoint_says_routed_attempted_suspended(
    coordinator: str, http: httpx.Client, dead_port: int
) -> None:
    dead = f"http://127.0.0.1:{dead_port}/invoke"
    body = {
        "id": "logistics-01",
        "capabilities": ["order.track"],
        "transport": {"type": "http", "endpoint": dead},
    }
    assert http.post("/v1/agents", json=body).status_code == 201
    answer = http.post("/v1/invoke", json={"capability": "order.track", "request_id": "dead-1"})
    assert answer.status_code == 202 and answer.json()["status"] == "suspended", answer.text

    walked = http.get("/v1/requests/dead-1/why").json()
    result = run("why", "dead-1", "--coordinator", coordinator)

    steps = {s["step"]: s for s in walked["steps"]}
    assert steps["routing"]["verdict"] == "ok", walked["summary"]
    assert "routed to logistics-01 for order.track by rule exact" in steps["routing"]["finding"]
    traced = {"capability": "order.track", "agent_id": "logistics-01", "rule": "exact"}
    assert steps["routing"]["traced"] == traced  # from its route span: no decision was kept
    # the registry held the instance, but nothing answered at its endpoint
    assert steps["registry"]["verdict"] == "unreachable", walked["summary"]
    assert (
        "logistics-01 was leased (health unknown) but unreachable" in (steps["registry"]["finding"])
    )
    assert walked["first_wrong_step"] == "registry"
    assert steps["delivery"]["verdict"] == "failed"
    attempts = steps["delivery"]["attempts"]
    assert [(a["agent_id"], a["outcome"]) for a in attempts] == [
        ("logistics-01", "agent_unreachable")
    ]
    assert "suspended" in steps["delivery"]["finding"]
    assert result.exit_code == 0, result.output
    assert_fits(result.output)
    out = " ".join(result.output.replace("│", " ").split())  # however rich wraps a cell
    assert "routed to logistics-01 for order.track by rule exact" in out
    assert "attempt 1: logistics-01 agent_unreachable" in out
    assert "so it was suspended" in out
    assert "Connection refused" in out or "connect" in out  # the instance's last error
    assert re.search(r"registry\s*│\s*unreachable\s*│", result.output), result.output
    assert "first wrong step: registry" in out
    assert out.index("routed to") < out.index("attempt 1:") < out.index("first wrong step")


def test_why_given_a_trace_id_names_it_and_walks_its_requests(
    coordinator: str, http: httpx.Client, dead_port: int
) -> None:
    dead = f"http://127.0.0.1:{dead_port}/invoke"
    body = {
        "id": "logistics-01",
        "capabilities": ["order.track"],
        "transport": {"type": "http", "endpoint": dead},
    }
    assert http.post("/v1/agents", json=body).status_code == 201
    answer = http.post("/v1/invoke", json={"capability": "order.track", "request_id": "dead-2"})
    trace_id = answer.json()["trace_id"]

    refused = http.get(f"/v1/requests/{trace_id}/why")
    result = run("why", trace_id, "--coordinator", coordinator)

    assert refused.status_code == 404
    error = refused.json()["error"]
    assert error["code"] == "unknown_request"
    assert error["trace_id"] == trace_id and error["request_ids"] == ["dead-2"]
    assert "is a trace id" in error["message"]
    assert result.exit_code == 0, result.output
    assert_fits(result.output)
    out = " ".join(result.output.split())
    assert f"{trace_id} is a trace id; its requests: dead-2" in out
    assert "request dead-2" in out and "first wrong step: registry" in out


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command's path, groups included (Typer's own Click has no `click.Group`)."""
    yield path
    for name, command in getattr(group, "commands", {}).items():
        yield from _commands(command, (*path, name))


COMMANDS = list(_commands(typer.main.get_command(app)))


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "agent-reach")
def test_every_help_fits_80_columns_and_types_no_flag(path: tuple[str, ...]) -> None:
    result = run(*path, "--help")

    assert result.exit_code == 0, result.output
    assert_fits(result.output)
    assert "<bool>" not in result.output  # a flag takes no value
    options = [line for line in result.output.splitlines() if re.search(r"│ [ *]*--", line)]
    assert not [o for o in options if re.search("<[a-z]", o)]  # `--port PORT`, not `<int>`
    assert result.output.count("AR_API_KEY") <= 1  # named once, by Typer's [env var: …]
    usage = next(line for line in result.output.splitlines() if "Usage:" in line)
    arguments = usage.split("[OPTIONS]", 1)[-1].split()  # `REQUEST_ID`, `[TEXT]`, `COMMAND`
    assert all(re.fullmatch(r"\[?[A-Z_]+\]?(\.\.\.)?", a) for a in arguments), usage


def test_every_argument_has_an_upper_case_name_and_a_description() -> None:
    for path in COMMANDS:
        command: Any = typer.main.get_command(app)
        for name in path:
            command = command.commands[name]
        for param in command.params:
            if param.param_type_name == "argument":
                assert param.metavar and param.metavar.isupper(), (path, param.name)
                assert param.help, (path, param.name)
