"""HealthTracker on plain data: the ejection pause doubles up to its maximum and stays there."""

from __future__ import annotations

from agent_reach.registry.health import (
    EJECTION_BASE_S,
    EJECTION_MAX_S,
    OFFLINE_AFTER,
    HealthTracker,
)


def test_the_reprobe_pause_doubles_then_stays_at_the_maximum_however_many_failures() -> None:
    tracker = HealthTracker()
    pauses = []
    # under overload an offline instance can time out thousands of deliveries in flight
    for _ in range(OFFLINE_AFTER + 5000):
        tracker.record(ok=False, source="delivery", now=100.0)
        if tracker.reprobe_at is not None:
            pauses.append(tracker.reprobe_at - 100.0)

    assert tracker.state == "offline"
    assert pauses[:3] == [EJECTION_BASE_S, 2 * EJECTION_BASE_S, 4 * EJECTION_BASE_S]
    assert pauses[-1] == EJECTION_MAX_S
    assert tracker.record(ok=True, source="probe", now=200.0) == "healthy"
