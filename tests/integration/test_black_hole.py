"""An instance that fails every delivery at once while its health check passes.

It answers 503 in about a millisecond, so it looks fast, and its probes pass, so each
ejection ends in a readmission. Five failed deliveries eject it again, and each
ejection doubles its pause (2 s, then 4 s): over a steady stream of requests it gets
fewer and fewer of them, and every request is served by the other instance.

The coordinator runs on a manual clock: a pause is the time the test moves it by, not
a stretch of real time measured on a loaded host.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from agent_reach.clock import ManualClock
from agent_reach.config import Settings
from agent_reach.registry.health import EJECTION_BASE_S, OFFLINE_AFTER
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_all_healthy, wait_until

JUST_SHORT_S = 0.01  # how far before its pause ends the hole is looked at


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def coordinator(settings: Settings, clock: ManualClock) -> Iterator[str]:
    """Probes every 100 ms of the manual clock: none is due until the test moves it."""
    fast = settings.model_copy(update={"probe_interval_s": 0.1})
    with run_coordinator(fast, clock) as (url, _):
        yield url


def status(http: httpx.Client, agent_id: str) -> str:
    return str(http.get(f"/v1/agents/{agent_id}").json()["status"])


def passed_probes(http: httpx.Client) -> float:
    for line in http.get("/metrics").text.splitlines():
        if line.startswith('agent_reach_probes_total{result="pass"}'):
            return float(line.split()[-1])
    return 0.0


def test_a_fast_failing_instance_with_a_passing_health_check_is_ejected_for_longer_each_time(
    http, register, fake_agents, clock
):
    hole, hole_endpoint = fake_agents(name="hole", status=503)  # health passes
    _, good_endpoint = fake_agents(name="good")
    register("hole-1", hole_endpoint, "echo", weight=5.0)  # first choice whenever it is in
    register("good-1", good_endpoint, "echo")
    wait_all_healthy(http)

    bursts, served = [], []
    for ejection in range(2):
        before = len(hole.received)
        for _ in range(10 * OFFLINE_AFTER):  # bounded by requests, not by the clock
            answer = http.post("/v1/invoke", json={"capability": "echo", "payload": {}})
            served.append((answer.status_code, answer.json().get("agent_id")))
            if status(http, "hole-1") == "offline":
                break
        bursts.append(len(hole.received) - before)
        pause_s = EJECTION_BASE_S * 2**ejection  # 2 s, then 4 s
        probes = passed_probes(http)  # before the move: the next probe may come at once
        clock.advance(pause_s - JUST_SHORT_S)
        # the good instance's next probe shows a look at what is due at the new time ...
        wait_until(lambda p=probes: passed_probes(http) > p, "a probe round at the new time")
        assert status(http, "hole-1") == "offline", f"readmitted before its {pause_s} s pause"
        clock.advance(2 * JUST_SHORT_S)  # ... and once the pause has run out, it is back
        wait_until(lambda: status(http, "hole-1") == "healthy", "the re-probe to readmit it")

    assert set(served) == {(200, "good-1")}, "a request was not served by the good instance"
    # No probe is due while the clock stands still, so none starts a burst's count over.
    assert bursts == [OFFLINE_AFTER, OFFLINE_AFTER]
