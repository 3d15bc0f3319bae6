"""The kill switch with requests parked behind it: disable -> park -> enable.

Two agent processes (SDK agents, a SQLite ledger each), neither declared `safe`; each
first answers a few requests, so remembered answers would exist if they were kept for
them. An admin disables both; requests for both are parked (each 202 names the agent
disabled, by whom). `refund-01` is enabled again: every request parked for it must end
`ok`, executed exactly once (its ledger). `hold-01` stays disabled: every request for it
must end, once its time runs out, with the true error — 503 naming the kill switch —
and none may be answered `degraded` from memory. On memory, Redis and the Redis Cluster.

CI runs 20 parked requests (10 on the Cluster); `AR_RELIABILITY_FULL=1` runs 200.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import orjson

from agent_reach.testing.waiting import wait_until

SUSPEND_S = 15.0  # long enough to park, enable and replay a full run; the held ones expire
POLICY = f"""
[delivery]
suspend_s = {SUSPEND_S}
"""
HELD_SHARE = 4  # one request in 4 is for the agent that stays disabled
ARTIFACTS = Path("test-artifacts") / "reliability"
SETTLE_S = SUSPEND_S + 60.0  # polled, not slept: generous for a loaded CI machine


def _requests(tier: str) -> int:
    return {"full": 200, "smoke": 20, "small": 10}[tier]


def _invoke(url: str, capability: str, request_id: str | None, order: int) -> dict[str, Any]:
    body: dict[str, Any] = {"capability": capability, "payload": {"order": order}}
    if request_id is not None:
        body["request_id"] = request_id
    answer = httpx.post(f"{url}/v1/invoke", json=body, timeout=10.0)
    document: dict[str, Any] = answer.json()
    return document


def _ended(url: str, request_ids: list[str]) -> dict[str, dict[str, Any]]:
    ended: dict[str, dict[str, Any]] = {}

    def all_ended() -> bool:
        with httpx.Client(base_url=url, timeout=5.0) as http:
            for request_id in request_ids:
                if request_id not in ended:
                    task = http.get(f"/v1/tasks/{request_id}").json()
                    if task.get("http_status"):
                        ended[request_id] = task
        return len(ended) == len(request_ids)

    wait_until(all_ended, f"{len(request_ids)} parked requests to end", SETTLE_S)
    return ended


def test_parked_requests_end_once_or_with_the_true_error_across_the_kill_switch(rig, backend, tier):
    coordinator = rig.coordinator(policy=POLICY, **backend)
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
    with ThreadPoolExecutor(8) as pool:
        accepted = list(pool.map(lambda p: _invoke(url, p[1], p[0], p[2]), plan))
    assert httpx.post(f"{url}/v1/agents/refund-01/enable", timeout=5).status_code == 200
    ended = _ended(url, [request_id for request_id, _, _ in plan])

    executed = Counter(row.request_id for row in rig.ledger() if row.kind == "executed")
    said_disabled = sum(
        any(i.get("disabled") for i in answer.get("instances") or []) for answer in accepted
    )
    statuses = Counter(task["status"] for task in ended.values())
    codes = Counter(
        task["answer"]["error"]["code"] for task in ended.values() if task["status"] == "error"
    )
    released = [r for r, capability, _ in plan if capability == "refund.issue"]
    held = [r for r, capability, _ in plan if capability == "hold.issue"]
    not_once = [r for r in released if ended[r]["status"] != "ok" or executed[r] != 1]
    untrue = [
        r
        for r in held
        if ended[r]["http_status"] != 503
        or "disabled (kill switch)" not in ended[r]["answer"]["error"]["message"]
        or executed[r] != 0
    ]
    twice = [r for r, n in executed.items() if n > 1]
    figures = {
        "requests": count,
        "parked": sum(a.get("status") == "suspended" for a in accepted),
        "said_disabled": said_disabled,
        "statuses": dict(statuses),
        "codes": dict(codes),
        "released": len(released),
        "released_not_ok_once": not_once,
        "held": len(held),
        "held_untrue": untrue,
        "executed_twice": twice,
        "degraded": statuses["degraded"],
        "config": {"policy": POLICY, "backend": backend["backend"], "tier": tier},
    }
    _write(f"kill_switch-{backend['backend']}", figures)
    assert figures["parked"] == said_disabled == count, figures
    assert statuses["degraded"] == 0 and twice == [], figures
    assert not_once == [] and untrue == [], figures


def _write(scenario: str, figures: dict[str, Any]) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"{scenario}.json").write_bytes(
        orjson.dumps({"scenario": scenario, **figures}, option=orjson.OPT_INDENT_2)
    )
