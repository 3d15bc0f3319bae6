"""The demo's shipment workflow against the demo's own agents: its timeline fits 80 columns."""

from __future__ import annotations

import io
from contextlib import ExitStack

from rich.cells import cell_len
from rich.console import Console

from agent_reach.config import Settings
from agent_reach.demo.scenario import build_agents
from agent_reach.demo.workflow import play_shipment
from agent_reach.sdk.client import ReachClient
from agent_reach.testing.servers import ServerThread, run_coordinator


async def test_the_shipment_question_runs_as_a_workflow_and_prints_its_timeline() -> None:
    out = io.StringIO()
    console = Console(file=out, width=80, color_system=None)
    settings = Settings(registry_backend="memory", decision_log="off", auth="off")
    with run_coordinator(settings) as (url, _), ExitStack() as stack:
        for agent in build_agents(url):
            server = ServerThread(agent.app)
            agent.endpoint_url = f"{server.url}/invoke"
            stack.enter_context(server)
        async with ReachClient(url) as client:
            served = await play_shipment(console, client)

    lines = out.getvalue().splitlines()
    assert served, out.getvalue()
    steps = {line.split()[0]: line for line in lines if line.startswith("  ") and "|" in line}
    assert set(steps) == {"order", "policy", "track"}
    assert "order.query" in steps["order"] and steps["order"].endswith("ok")
    # the track waits for the order: its bar starts where the order's ends
    assert steps["track"].index("█") > steps["order"].index("█")
    assert "顺丰速运" in out.getvalue()
    assert all(cell_len(line) <= 80 for line in lines)
