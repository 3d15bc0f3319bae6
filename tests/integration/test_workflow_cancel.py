"""Cancelling a workflow run, on memory and Redis, against real FakeAgents.

Once `POST /v1/workflows/{run_id}/cancel` has answered, no step starts: steps in
flight finish and keep their outcome, the rest end `cancelled`, and so does the run.
Each test counts what the agents executed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from agent_reach import Conflict, Orchestrator, ReachClient
from agent_reach.cli import app
from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_until

POLICY = """
[delivery]
backoff_s = [0.05]
suspend_s = 30.0
"""  # a parked run stays parked for the whole test unless it is cancelled


@pytest.fixture
def coordinator(settings: Settings, tmp_path) -> Iterator[str]:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    with run_coordinator(settings.model_copy(update={"policy_file": policy})) as (url, _):
        yield url


# the second step waits for the first, which its agent holds until the test lets it go
TWO_STEPS = (
    {"id": "order", "action": "order.query"},
    {"id": "kb", "action": "kb.article.query", "depends_on": ["order"]},
)


@pytest.fixture
def shop(gated_agents, fake_agents, register) -> tuple[Any, Any]:
    """The agents of `TWO_STEPS`, registered: (the held first one, the second one)."""
    held, held_at = gated_agents(name="order", answer={"status": "shipped"})
    after, after_at = fake_agents(name="kb", answer={"kb": 1})
    assert register("order-1", held_at, "order.query").status_code == 201
    assert register("kb-1", after_at, "kb.article.query").status_code == 201
    return held, after


def start(http: httpx.Client, *steps: dict[str, Any], **body: Any) -> dict[str, Any]:
    accepted = http.post("/v1/workflows/run", json={"steps": list(steps), "mode": "async", **body})
    assert accepted.status_code == 202, accepted.text
    return accepted.json()


def ended(http: httpx.Client, run_id: str) -> dict[str, Any]:
    return wait_until(
        lambda: (
            (r := http.get(f"/v1/workflows/{run_id}").json())["status"]
            in ("ok", "partial", "error", "cancelled")
            and r
        ),
        f"run {run_id} to end",
    )


def steps_of(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {step["id"]: step for step in view["steps"]}


def posts(agent) -> list[str]:
    return [r.body["request_id"] for r in agent.received if r.body]


def test_no_step_starts_after_a_cancel_and_the_one_in_flight_keeps_its_outcome(http, shop):
    held, after = shop
    run = start(http, *TWO_STEPS)
    wait_until(lambda: posts(held), "the first step to reach its agent")

    cancel = http.post(f"/v1/workflows/{run['run_id']}/cancel")
    held.gate.set()
    done = ended(http, run["run_id"])
    again = http.post(f"/v1/workflows/{run['run_id']}/cancel")

    assert cancel.status_code == 202, cancel.text
    assert cancel.json()["cancelled"] is True
    assert cancel.json()["poll"] == f"/v1/workflows/{run['run_id']}"
    assert done["status"] == "cancelled"
    steps = steps_of(done)
    assert steps["order"]["status"] == "ok"
    assert done["result"] == {"order": {"status": "shipped"}}
    assert steps["kb"]["status"] == "cancelled"
    assert "cancelled" in steps["kb"]["reason"]
    assert posts(held) == [f"{run['run_id']}:order"]
    assert posts(after) == []
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "run_ended"


def test_a_cancelled_run_never_starts_its_summarizer(http, gated_agents, fake_agents, register):
    held, held_at = gated_agents(name="order", answer={"status": "shipped"})
    summary, summary_at = fake_agents(name="summary", answer={"text": "done"})
    assert register("order-1", held_at, "order.query").status_code == 201
    assert register("summary-1", summary_at, "summary.write").status_code == 201
    run = start(
        http, {"id": "order", "action": "order.query"}, aggregate={"capability": "summary.write"}
    )
    wait_until(lambda: posts(held), "the step to reach its agent")

    assert http.post(f"/v1/workflows/{run['run_id']}/cancel").status_code == 202
    held.gate.set()
    done = ended(http, run["run_id"])

    assert done["status"] == "cancelled"
    assert steps_of(done)["order"]["status"] == "ok"
    assert steps_of(done)["_aggregate"]["status"] == "cancelled"
    assert posts(summary) == []


def test_a_parked_run_is_ended_by_a_cancel(http, fake_agents, register):
    # down, probes included: a live instance would resume the runs every few tenths of
    # a second, and a cancel could find its run between two resumes, running
    down, down_at = fake_agents(name="order", status=503, healthy=False)
    assert register("order-1", down_at, "order.query").status_code == 201
    run = start(http, {"id": "order", "action": "order.query"})
    control = start(http, {"id": "order", "action": "order.query"})  # parked, not cancelled
    wait_until(
        lambda: http.get("/v1/agents/order-1").json()["status"] == "offline", "order-1 offline"
    )
    for parked in (run, control):
        wait_until(
            lambda parked=parked: (
                http.get(f"/v1/workflows/{parked['run_id']}").json()["status"] == "parked"
            ),
            "the runs to park",
        )

    cancel = http.post(f"/v1/workflows/{run['run_id']}/cancel")
    done = ended(http, run["run_id"])
    sent = posts(down).count(f"{run['run_id']}:order")
    down.status, down.healthy = 200, True  # back: a run that was not cancelled resumes ...
    resumed = ended(http, control["run_id"])  # ... as the control run shows it did

    assert cancel.status_code == 202
    assert cancel.json()["status"] == "parked"
    assert done["status"] == "cancelled"
    assert steps_of(done)["order"]["status"] == "cancelled"
    assert resumed["status"] == "ok"
    assert posts(down).count(f"{run['run_id']}:order") == sent


def test_cancelling_an_unknown_or_malformed_run_id_is_a_clear_4xx(http):
    answer = http.post("/v1/workflows/no-such-run/cancel")
    malformed = http.post("/v1/workflows/-bad%20id/cancel")
    too_long = http.post(f"/v1/workflows/{'r' * 65}/cancel")

    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "unknown_run"
    for refused in (malformed, too_long):
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "validation_error"


def test_a_cancel_sent_to_another_coordinator_stops_the_run_where_it_is_held(
    shared: Settings, gated_agents, fake_agents
):
    held, held_at = gated_agents(name="order", answer={"status": "shipped"})
    after, after_at = fake_agents(name="kb", answer={"kb": 1})
    with (
        run_coordinator(shared) as (first_url, _),
        run_coordinator(shared) as (second_url, _),
        httpx.Client(base_url=first_url, timeout=10) as first,
        httpx.Client(base_url=second_url, timeout=10) as second,
    ):
        for agent_id, endpoint, capability in (
            ("order-1", held_at, "order.query"),
            ("kb-1", after_at, "kb.article.query"),
        ):
            transport = {"type": "http", "endpoint": endpoint}
            body = {"id": agent_id, "capabilities": [capability], "transport": transport}
            assert first.post("/v1/agents", json=body).status_code == 201
        run = start(first, *TWO_STEPS)
        wait_until(lambda: posts(held), "the first step to reach its agent")

        cancel = second.post(f"/v1/workflows/{run['run_id']}/cancel")
        held.gate.set()
        done = ended(second, run["run_id"])

    assert cancel.status_code == 202, cancel.text
    assert done["status"] == "cancelled"
    assert steps_of(done)["kb"]["status"] == "cancelled"
    assert posts(held) == [f"{run['run_id']}:order"]
    assert posts(after) == []


def test_the_cli_cancels_a_run(coordinator, http, shop):
    held, after = shop
    run = start(http, *TWO_STEPS)
    wait_until(lambda: posts(held), "the first step to reach its agent")
    runner = CliRunner()

    cancelled = runner.invoke(
        app, ["workflow", "cancel", run["run_id"], "--coordinator", coordinator]
    )
    held.gate.set()
    done = ended(http, run["run_id"])
    again = runner.invoke(app, ["workflow", "cancel", run["run_id"], "--coordinator", coordinator])

    assert cancelled.exit_code == 0, cancelled.output
    assert f"run {run['run_id']} cancelled (it was running)" in cancelled.output
    assert done["status"] == "cancelled"
    assert posts(after) == []
    assert again.exit_code != 0
    assert "run_ended" in again.output


async def test_the_sdk_cancels_a_run(coordinator, shop):
    held, after = shop
    steps = list(TWO_STEPS)
    async with ReachClient(coordinator) as client:
        orchestrator = Orchestrator(client)
        run = await orchestrator.run({"steps": steps}, mode="async")
        await asyncio.to_thread(wait_until, lambda: posts(held), "the step to reach its agent")

        cancelled = await orchestrator.cancel(run.run_id)
        held.gate.set()
        done = await orchestrator.run({"steps": steps}, request_id=run.run_id)
        with pytest.raises(Conflict) as again:
            await orchestrator.cancel(run.run_id)

    assert cancelled.run_id == run.run_id and cancelled.status == "running"
    assert done.status == "cancelled"
    assert done.step("kb").status == "cancelled"
    assert posts(after) == []
    assert again.value.code == "run_ended"
