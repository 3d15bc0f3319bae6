"""HealthTracker on plain data: the ejection pause doubles per ejection (not per failure)
up to its maximum, and stays there."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_reach.registry.health import (
    EJECTION_BASE_S,
    EJECTION_MAX_S,
    OFFLINE_AFTER,
    HealthTracker,
)


def ejected(now: float = 0.0) -> HealthTracker:
    tracker = HealthTracker()
    for _ in range(OFFLINE_AFTER):
        tracker.record(ok=False, source="delivery", now=now)
    assert tracker.state == "offline"
    return tracker


def test_the_first_ejection_pauses_for_the_base_time() -> None:
    tracker = ejected(now=10.0)
    assert (tracker.ejections, tracker.reprobe_at) == (1, 10.0 + EJECTION_BASE_S)


def test_deliveries_failing_after_the_ejection_do_not_lengthen_the_pause() -> None:
    tracker = ejected(now=10.0)
    for _ in range(60):  # the requests that were still in flight when it went out
        tracker.record(ok=False, source="delivery", now=10.5)
    assert (tracker.state, tracker.ejections) == ("offline", 1)
    assert tracker.reprobe_at == 10.0 + EJECTION_BASE_S


def test_each_failed_re_probe_doubles_the_pause_up_to_the_maximum() -> None:
    tracker = ejected()
    pauses = []
    now = 0.0
    for _ in range(8):
        assert tracker.reprobe_at is not None
        now = tracker.reprobe_at
        tracker.record(ok=False, source="probe", now=now)
        pauses.append(tracker.reprobe_at - now)
    expected = [min(EJECTION_MAX_S, EJECTION_BASE_S * 2**n) for n in range(1, 9)]
    assert pauses == expected


def test_a_passing_probe_readmits_and_the_next_ejection_starts_over() -> None:
    tracker = ejected()
    tracker.record(ok=False, source="probe", now=2.0)
    assert tracker.record(ok=True, source="probe", now=6.0) == "healthy"
    for _ in range(OFFLINE_AFTER):
        tracker.record(ok=False, source="delivery", now=7.0)
    assert (tracker.ejections, tracker.reprobe_at) == (1, 7.0 + EJECTION_BASE_S)


@given(st.lists(st.sampled_from(["delivery", "probe"]), max_size=40))
def test_the_pause_follows_the_failed_probes_while_out_only(sources: list[str]) -> None:
    tracker = ejected()
    for source in sources:
        tracker.record(ok=False, source=source, now=1.0)  # type: ignore[arg-type]
    probes = sources.count("probe")
    assert tracker.ejections == 1 + probes
    assert tracker.reprobe_at == 1.0 * (probes > 0) + min(
        EJECTION_MAX_S, EJECTION_BASE_S * 2**probes
    )


def test_the_reprobe_pause_doubles_then_stays_at_the_maximum_however_many_failures() -> None:
    tracker = ejected(now=100.0)
    pauses = [EJECTION_BASE_S]
    for _ in range(5000):  # an instance failing its re-probes for days: no float overflow
        tracker.record(ok=False, source="probe", now=100.0)
        assert tracker.reprobe_at is not None
        pauses.append(tracker.reprobe_at - 100.0)

    assert tracker.state == "offline"
    assert pauses[:3] == [EJECTION_BASE_S, 2 * EJECTION_BASE_S, 4 * EJECTION_BASE_S]
    assert pauses[-1] == EJECTION_MAX_S
    assert tracker.record(ok=True, source="probe", now=200.0) == "healthy"
