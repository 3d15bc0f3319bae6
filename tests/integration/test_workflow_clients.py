"""Workflows from the SDK (`Orchestrator`, `SyncOrchestrator`) and the CLI, on both backends."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from agent_reach import Orchestrator, ReachClient, SyncOrchestrator, SyncReachClient
from agent_reach.cli import app

WIDE = {"COLUMNS": "200"}  # keep Rich from cutting tree lines
SHIPMENT_YAML = """\
workflow:
  name: shipment-query
  intent: shipment_query
  inputs:
    order_no: {required: true}
    limit: {required: false, default: 3}
  steps:
    - {id: order, action: order.query, param: {order_no: "{{input.order_no}}"}}
    - id: kb
      action: kb.article.query
      param: {keyword: shipment_policy, limit: "{{input.limit}}"}
    - id: reply
      action: reply.write
      depends_on: [order, kb]
      param: {status: "{{steps.order.result.status}}"}
  fallback: kb.article.query
"""


@pytest.fixture
def shop(fake_agents, register):
    agents = {}
    for capability, answer in (
        ("order.query", {"status": "shipped"}),
        ("kb.article.query", {"articles": ["policy"]}),
        ("reply.write", {"text": "已发货"}),
    ):
        agent, endpoint = fake_agents(name=capability, answer=answer)
        assert register(f"{capability}-1", endpoint, capability).status_code == 201
        agents[capability] = agent
    return agents


async def test_the_original_orchestrator_call_runs_and_answers_each_step(coordinator, shop):
    async def task_query() -> None:  # the original system named its flows by a handler
        """customer_service.task_query"""

    async with ReachClient(coordinator) as client:
        orchestrator = Orchestrator(client)
        reply = await orchestrator.run(
            task_query,
            {
                "intent": "shipment_query",
                "steps": [
                    {"action": "order.query", "param": {"order_no": "888"}},
                    {"action": "kb.article.query", "param": {"keyword": "shipment_policy"}},
                ],
                "fallback": "kb.article.query",
            },
        )
        again = await orchestrator.get(reply.run_id)

    assert reply.status == "ok"
    assert reply.result == {"0": {"status": "shipped"}, "1": {"articles": ["policy"]}}
    assert reply.step("0").agent_id == "order.query-1"
    assert again.model_dump() == reply.model_dump()
    assert shop["order.query"].received[0].body["payload"] == {"order_no": "888"}


def test_a_saved_workflow_runs_by_name_with_its_input_and_defaults(coordinator, shop):
    with SyncReachClient(coordinator) as client:
        orchestrator = SyncOrchestrator(client)
        httpx.post(
            f"{coordinator}/v1/workflows",
            content=SHIPMENT_YAML.encode(),
            headers={"Content-Type": "application/yaml"},
        ).raise_for_status()
        reply = orchestrator.run("shipment-query", {"order_no": "888"})

    assert reply.status == "ok"
    assert reply.result["reply"] == {"text": "已发货"}
    assert shop["kb.article.query"].received[0].body["payload"]["limit"] == 3
    assert shop["reply.write"].received[0].body["payload"] == {"status": "shipped"}


def test_cli_runs_a_workflow_file_and_shows_the_run_as_a_tree(coordinator, shop, tmp_path: Path):
    file = tmp_path / "shipment.yaml"
    file.write_text(SHIPMENT_YAML, encoding="utf-8")
    runner = CliRunner()

    ran = runner.invoke(
        app,
        [
            "workflow",
            "run",
            str(file),
            "--input",
            '{"order_no": "888"}',
            "--coordinator",
            coordinator,
        ],
        env=WIDE,
    )
    assert ran.exit_code == 0, ran.output
    run_id = next(line for line in ran.output.splitlines() if line.startswith("run ")).split()[1]
    shown = runner.invoke(app, ["workflow", "show", run_id, "--coordinator", coordinator], env=WIDE)
    missing = runner.invoke(app, ["workflow", "show", "nope", "--coordinator", coordinator])

    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert "shipment_query" in lines[0] and "ok" in lines[0]
    order, kb, reply = (
        next(line for line in lines if f"{s} " in line) for s in ("order", "kb", "reply")
    )
    assert "order.query → order.query-1" in order and " ms" in order
    assert "kb.article.query" in kb
    # reply depends on both: it hangs under one of them, indented deeper than they are
    indent = len(reply) - len(reply.lstrip("│ └├─"))
    assert indent > len(order) - len(order.lstrip("│ └├─"))
    assert missing.exit_code != 0
    assert "unknown_run" in missing.output
