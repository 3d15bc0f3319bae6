"""Workflow runs under faults, with real processes: a coordinator SIGKILLed mid-run, an agent
SIGKILLed mid-step.

- Two coordinators on one Redis; runs are submitted to A, A is SIGKILLed while their steps
  are in flight. B takes A's runs over once their queue entries are stale
  (`AR_TASK_STALE_S`, 3 s here) and finishes them; a step A had sent is sent again under
  the same request id only after A's idempotency lease ran out, and the agent's guard
  answers it. Every step must be executed exactly once (the agents' ledgers) and every
  run must end `ok`.
- One coordinator; the agent of a step's capability is SIGKILLed mid-step: the steps in
  flight and those after take the step's fallback; no run is lost.

CI runs 20 runs each (8 on the Redis Cluster); `AR_RELIABILITY_FULL=1` runs the 100 of
the issue.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from agent_reach.invoke.idempotency import LEASE_GRACE_S
from agent_reach.testing.waiting import wait_until

# Short classes keep A's idempotency lease (longest class deadline + LEASE_GRACE_S) at 6 s.
POLICY = """
[timeout_classes.query]
timeout_s = 1.0

[timeout_classes.reasoning]
timeout_s = 1.0

[timeout_classes.long]
timeout_s = 1.0
asynchronous = true

[delivery]
backoff_s = [0.05]
"""
STALE_S = 3.0
LEASE_S = 1.0 + LEASE_GRACE_S
SETTLE_S = STALE_S + LEASE_S + 30.0  # generous for a loaded CI machine; polled, not slept
ARTIFACTS = Path("test-artifacts") / "reliability"


def _runs(tier: str) -> int:
    return {"full": 100, "smoke": 20, "small": 8}[tier]


def _submit(url: str, run_id: str, steps: list[dict[str, Any]]) -> None:
    body = {"request_id": run_id, "mode": "async", "steps": steps}
    answer = httpx.post(f"{url}/v1/workflows/run", json=body, timeout=5.0)
    assert answer.status_code == 202, answer.text


def _final(url: str, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Every run once it is final, read from `url`."""
    done: dict[str, dict[str, Any]] = {}

    def all_final() -> bool:
        for run_id in run_ids:
            if run_id not in done:
                view = httpx.get(f"{url}/v1/workflows/{run_id}", timeout=5.0).json()
                if view.get("status") in ("ok", "partial", "error"):
                    done[run_id] = view
        return len(done) == len(run_ids)

    wait_until(all_final, f"{len(run_ids)} runs to end", SETTLE_S)
    return done


def _write(name: str, figures: dict[str, Any]) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"{name}.json").write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2))


def test_runs_of_a_killed_coordinator_are_finished_by_another_without_repeating_a_step(
    rig, store, tier
):
    shared = {**store, "extra_env": {"AR_TASK_STALE_S": str(STALE_S)}}
    a = rig.coordinator(policy=POLICY, **shared)
    b = rig.coordinator(policy=POLICY, **shared)
    agents = [
        rig.agent(f"{name}-1", f"wf.{name}", b.url, latency_ms=(200, 400))
        for name in ("order", "kb", "reply")
    ]
    rig.start(*agents)
    rig.wait_healthy(a.url, [agent.agent_id for agent in agents])
    steps = [
        {"id": "order", "action": "wf.order"},
        {"id": "kb", "action": "wf.kb"},
        {"id": "reply", "action": "wf.reply", "depends_on": ["order", "kb"],
         "param": {"order": "{{steps.order.result.request_id}}"}},
    ]  # fmt: skip
    run_ids = [f"takeover-{i}" for i in range(_runs(tier))]
    for run_id in run_ids:
        _submit(a.url, run_id, steps)
    a.kill()

    ended = _final(b.url, run_ids)
    executed = Counter(row.request_id for row in rig.ledger() if row.kind == "executed")
    expected = [f"{run_id}:{step['id']}" for run_id in run_ids for step in steps]
    twice = [request_id for request_id in expected if executed[request_id] > 1]
    never = [request_id for request_id in expected if executed[request_id] == 0]
    not_ok = [run_id for run_id, view in ended.items() if view["status"] != "ok"]
    taken_over = [run_id for run_id, view in ended.items() if view["takeovers"] > 0]
    dedup_hits = sum(row.kind == "dedup_hit" for row in rig.ledger())
    _write(
        f"workflow_takeover-{store['backend']}",
        {
            "runs": len(run_ids),
            "steps": len(expected),
            "taken_over": len(taken_over),
            "executed_twice": len(twice),
            "not_ok": not_ok,
            "dedup_hits": dedup_hits,
            "config": {"policy": POLICY, "stale_s": STALE_S, "lease_s": LEASE_S},
        },
    )
    assert taken_over, "no run was in flight on the killed coordinator"
    assert not_ok == [] and twice == [] and never == []


@pytest.mark.parametrize("backend_name", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
def test_an_agent_killed_mid_step_sends_its_steps_to_the_fallback_and_no_run_is_lost(
    rig, backend_name, request, tier
):
    options: dict[str, Any] = {"backend": backend_name}
    if backend_name == "redis":
        options |= {
            "redis_url": request.getfixturevalue("redis_url"),
            "redis_prefix": request.getfixturevalue("redis_prefix"),
        }
    coordinator = rig.coordinator(policy=POLICY, **options)
    primary = rig.agent("primary-1", "wf.primary", coordinator.url, latency_ms=(300, 600))
    backup = rig.agent("backup-1", "wf.backup", coordinator.url, latency_ms=(10, 30))
    rig.start(primary, backup)
    rig.wait_healthy(coordinator.url, [primary.agent_id, backup.agent_id])
    steps = [
        {"id": "lookup", "action": "wf.primary", "fallback": "wf.backup"},
        {"id": "after", "action": "wf.backup", "depends_on": ["lookup"]},
    ]
    run_ids = [f"agent-kill-{i}" for i in range(_runs(tier))]
    half = len(run_ids) // 2
    for run_id in run_ids[:half]:
        _submit(coordinator.url, run_id, steps)
    wait_until(
        lambda: any(row.request_id.endswith(":lookup") for row in primary.ledger()) or None,
        "the primary agent to be working on a step",
    )
    primary.kill()
    for run_id in run_ids[half:]:
        _submit(coordinator.url, run_id, steps)

    ended = _final(coordinator.url, run_ids)
    lookups = {run_id: view["steps"][0] for run_id, view in ended.items()}
    by_fallback = [r for r, step in lookups.items() if step["status"] == "fallback"]
    not_ok = [run_id for run_id, view in ended.items() if view["status"] != "ok"]
    _write(
        f"workflow_agent_killed-{backend_name}",
        {
            "runs": len(run_ids),
            "lost": len(run_ids) - len(ended),
            "not_ok": not_ok,
            "served_by_fallback": len(by_fallback),
            "primary_outcomes": Counter(s["tried"].get("wf.primary") for s in lookups.values()),
        },
    )
    assert not_ok == []
    assert len(by_fallback) >= len(run_ids) - half  # every run after the kill, at least
    assert all(lookups[r]["fallback_used"] == "wf.backup" for r in by_fallback)
