"""The kill switch with requests parked behind it: disable -> park -> enable.

Two agent processes (SDK agents, a SQLite ledger each), neither declared `safe`; each
first answers a few requests, so remembered answers would exist if they were kept for
them. An admin disables both; requests for both are parked (each 202 names the agent
disabled, by whom). `refund-01` is enabled again: every request parked for it must end
`ok`, executed exactly once (its ledger). `hold-01` stays disabled: every request for it
must end, once its time runs out, with the true error — 503 naming the kill switch
(as must one for refund-01 whose time ran out before the enable) — and none may be
answered `degraded` from memory. On memory, Redis and the Redis Cluster.

CI runs 20 parked requests (10 on the Cluster); `AR_RELIABILITY_FULL=1` runs 200.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import orjson

from agent_reach.testing.waiting import wait_until

POLICY = """
[delivery]
suspend_s = {suspend_s}
"""
HELD_SHARE = 4  # one request in 4 is for the agent that stays disabled
ARTIFACTS = Path("test-artifacts") / "reliability"
SETTLE_S = 60.0  # beyond the suspension: polled, not slept, generous for a loaded machine
MARGIN_S = 2.0  # a request expiring this soon after the enable may end either way


def _requests(tier: str) -> int:
    return {"full": 200, "smoke": 20, "small": 10}[tier]


def _suspend_s(tier: str) -> float:
    """Long enough to park them all before the enable (200 took over 15 s on a loaded
    2-core machine); the held ones then expire."""
    return {"full": 60.0, "smoke": 15.0, "small": 15.0}[tier]


def _invoke(url: str, capability: str, request_id: str | None, order: int) -> dict[str, Any]:
    body: dict[str, Any] = {"capability": capability, "payload": {"order": order}}
    if request_id is not None:
        body["request_id"] = request_id
    answer = httpx.post(f"{url}/v1/invoke", json=body, timeout=10.0)
    document: dict[str, Any] = answer.json()
    return document


def _ended(url: str, request_ids: list[str], settle_s: float) -> dict[str, dict[str, Any]]:
    ended: dict[str, dict[str, Any]] = {}

    def all_ended() -> bool:
        with httpx.Client(base_url=url, timeout=5.0) as http:
            for request_id in request_ids:
                if request_id not in ended:
                    task = http.get(f"/v1/tasks/{request_id}").json()
                    if task.get("http_status"):
                        ended[request_id] = task
        return len(ended) == len(request_ids)

    wait_until(all_ended, f"{len(request_ids)} parked requests to end", settle_s)
    return ended


def test_parked_requests_end_once_or_with_the_true_error_across_the_kill_switch(rig, backend, tier):
    policy = POLICY.format(suspend_s=_suspend_s(tier))
    coordinator = rig.coordinator(policy=policy, **backend)
    url = coordinator.url
    agents = [
        rig.agent(a, c, url) for a, c in (("refund-01", "refund.issue"), ("hold-01", "hold.issue"))
    ]
    rig.start(*agents)
    rig.wait_healthy(url, ["refund-01", "hold-01"])
    for capability in ("refund.issue", "hold.issue"):  # earlier answers to the same payloads
        for order in range(HELD_SHARE):
            assert _invoke(url, capability, None, order)["status"] == "ok"
    for agent_id in ("refund-01", "hold-01"):
        assert httpx.post(f"{url}/v1/agents/{agent_id}/disable", timeout=5).status_code == 200

    count = _requests(tier)
    plan = [
        (f"park-{n}", "hold.issue" if n % HELD_SHARE == 0 else "refund.issue", n % HELD_SHARE)
        for n in range(count)
    ]
    parking = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        accepted = list(pool.map(lambda p: _invoke(url, p[1], p[0], p[2]), plan))
    parking_s = round(time.monotonic() - parking, 1)
    enabled_at = time.time()
    assert httpx.post(f"{url}/v1/agents/refund-01/enable", timeout=5).status_code == 200
    ended = _ended(url, [request_id for request_id, _, _ in plan], _suspend_s(tier) + SETTLE_S)

    executed = Counter(row.request_id for row in rig.ledger() if row.kind == "executed")
    said_disabled = sum(
        any(i.get("disabled") for i in answer.get("instances") or []) for answer in accepted
    )
    statuses = Counter(task["status"] for task in ended.values())
    codes = Counter(
        task["answer"]["error"]["code"] for task in ended.values() if task["status"] == "error"
    )
    until = {r: a.get("suspended_until", 0.0) for (r, _, _), a in zip(plan, accepted, strict=True)}
    # Released: parked for refund-01 and still waiting well after the enable; they must
    # run. Every request, those too, ends ok executed once, or with the true error: 503
    # naming the kill switch (held for hold-01, or expired before the enable), not run.
    released = [r for r, c, _ in plan if c == "refund.issue" and until[r] > enabled_at + MARGIN_S]
    not_run = [r for r in released if ended[r]["status"] != "ok"]
    untrue = [
        r
        for r, _, _ in plan
        if not _ok_once(ended[r], executed[r]) and not _true_error(ended[r], executed[r])
    ]
    twice = [r for r, n in executed.items() if n > 1]
    figures = {
        "requests": count,
        "parked": sum(a.get("status") == "suspended" for a in accepted),
        "said_disabled": said_disabled,
        "parking_s": parking_s,
        "statuses": dict(statuses),
        "codes": dict(codes),
        "released": len(released),
        "released_not_ok": not_run,
        "neither_ok_once_nor_true_error": untrue,
        "executed_twice": twice,
        "degraded": statuses["degraded"],
        "config": {"policy": policy, "backend": backend["backend"], "tier": tier},
    }
    _write(f"kill_switch-{backend['backend']}", figures)
    assert figures["parked"] == said_disabled == count, figures
    assert statuses["degraded"] == 0 and twice == [], figures
    assert released and not_run == [] and untrue == [], figures


def _ok_once(task: dict[str, Any], executions: int) -> bool:
    return task["status"] == "ok" and executions == 1


def _true_error(task: dict[str, Any], executions: int) -> bool:
    error = task["answer"].get("error") or {}
    return (
        task["http_status"] == 503
        and "disabled (kill switch)" in error.get("message", "")
        and executions == 0
    )


def _write(scenario: str, figures: dict[str, Any]) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"{scenario}.json").write_bytes(
        orjson.dumps({"scenario": scenario, **figures}, option=orjson.OPT_INDENT_2)
    )
