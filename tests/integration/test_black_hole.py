"""An instance that fails every delivery at once while its health check passes.

It answers 503 in about a millisecond, so it looks fast, and its probes pass, so each
ejection ends in a readmission. Five failed deliveries eject it again, and each
ejection doubles its pause (2 s, then 4 s): over a steady stream of requests it gets
fewer and fewer of them, and every request is served by the other instance.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest

from agent_reach.config import Settings
from agent_reach.registry.health import EJECTION_BASE_S, OFFLINE_AFTER
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_until

PACE_S = 0.02  # one request every 20 ms
RUN_BOUND_S = 20.0  # the pauses (2 s, 4 s) and the bursts between them take about 7 s
QUIET_S = 1.0  # a gap this long between deliveries to it: it was out


def bursts_of(arrivals: list[float]) -> list[list[float]]:
    """The arrival times grouped where the hole got nothing for QUIET_S or more."""
    bursts: list[list[float]] = []
    for t in arrivals:
        if not bursts or t - bursts[-1][-1] >= QUIET_S:
            bursts.append([])
        bursts[-1].append(t)
    return bursts


def pauses_between(bursts: list[list[float]]) -> list[float]:
    return [later[0] - earlier[-1] for earlier, later in itertools.pairwise(bursts)]


@pytest.fixture
def coordinator(settings: Settings) -> Iterator[str]:
    """Probes every 100 ms: an ejected instance is re-probed as soon as its pause ends."""
    with run_coordinator(settings.model_copy(update={"probe_interval_s": 0.1})) as (url, _):
        yield url


def test_a_fast_failing_instance_with_a_passing_health_check_is_ejected_for_longer_each_time(
    http, register, fake_agents
):
    hole, hole_endpoint = fake_agents(name="hole", status=503)  # health passes
    _, good_endpoint = fake_agents(name="good")
    register("hole-1", hole_endpoint, "echo", weight=5.0)  # first choice whenever it is in
    register("good-1", good_endpoint, "echo")
    wait_until(  # both probed: an instance no probe has answered yet is scored down
        lambda: {a["status"] for a in http.get("/v1/agents").json()["agents"]} == {"healthy"},
        "the probes sent at registration to pass",
    )

    arrivals: list[float] = []  # when each delivery to the hole was seen
    served = []
    start = time.monotonic()
    # Until the hole's third burst of deliveries (two readmissions), or the bound.
    while len(pauses := pauses_between(bursts_of(arrivals))) < 2:
        now = time.monotonic()
        assert now - start < RUN_BOUND_S, f"two readmissions within {RUN_BOUND_S} s: {pauses}"
        answer = http.post("/v1/invoke", json={"capability": "echo", "payload": {}})
        served.append((answer.status_code, answer.json().get("agent_id")))
        arrivals += [time.monotonic() - start] * (len(hole.received) - len(arrivals))
        time.sleep(max(0.0, PACE_S - (time.monotonic() - now)))

    assert set(served) == {(200, "good-1")}, "a request was not served by the good instance"
    # A passing probe between two failed deliveries starts their count over, so a burst
    # may hold more than OFFLINE_AFTER (the first, before any ejection, often does).
    assert all(len(b) >= OFFLINE_AFTER for b in bursts_of(arrivals)[:2]), arrivals
    first, second = pauses
    assert first == pytest.approx(EJECTION_BASE_S, abs=0.5)
    assert second == pytest.approx(2 * EJECTION_BASE_S, abs=0.5), pauses
