"""HealthTracker on plain data: the ejection pause doubles per ejection (not per failure)
up to its maximum, and stays there; a passing probe readmits, a served delivery proves."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_reach.registry.health import (
    EJECTION_BASE_S,
    EJECTION_MAX_S,
    OFFLINE_AFTER,
    SUSPECT_AFTER,
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


@given(st.booleans())
def test_a_probe_sent_before_the_ejection_neither_readmits_nor_doubles(ok: bool) -> None:
    # Probed every interval while it was in: the answer to a probe sent just before five
    # deliveries failed says nothing about the instance they took out.
    tracker = ejected(now=10.0)
    assert tracker.record(ok=ok, source="probe", now=10.2, sent_at=9.9) == "offline"
    assert (tracker.ejections, tracker.reprobe_at) == (1, 10.0 + EJECTION_BASE_S)
    assert tracker.record(ok=ok, source="probe", now=12.1, sent_at=12.0) == (
        "healthy" if ok else "offline"
    )


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


def readmitted_then_ejected(*successes: tuple[str, float]) -> HealthTracker:
    """Ejected at 0, a failed re-probe at 2 (4 s pause), readmitted by a probe at 6, the
    given successes, then 5 failed deliveries at 7 + the last success's time."""
    tracker = ejected()
    tracker.record(ok=False, source="probe", now=2.0)
    assert tracker.record(ok=True, source="probe", now=6.0) == "healthy"
    now = 6.0
    for source, now in successes:
        tracker.record(ok=True, source=source, now=now)  # type: ignore[arg-type]
    for _ in range(OFFLINE_AFTER):
        tracker.record(ok=False, source="delivery", now=now + 1.0)
    assert tracker.state == "offline"
    return tracker


def test_a_readmitted_instance_that_fails_every_delivery_is_ejected_for_longer() -> None:
    # A fast-failing instance whose health endpoint passes: each readmission ends in
    # 5 failed deliveries, and each ejection doubles the pause.
    tracker = readmitted_then_ejected()
    assert (tracker.ejections, tracker.reprobe_at) == (3, 7.0 + 4 * EJECTION_BASE_S)


def test_a_readmitted_instance_that_serves_once_starts_the_count_over() -> None:
    tracker = readmitted_then_ejected(("delivery", 6.5))
    assert (tracker.ejections, tracker.reprobe_at) == (1, 7.5 + EJECTION_BASE_S)


def test_passing_probes_prove_nothing_until_it_has_stayed_in_for_the_maximum_pause() -> None:
    soon = readmitted_then_ejected(("probe", 6.0 + EJECTION_MAX_S / 2))
    assert soon.ejections == 3
    later = readmitted_then_ejected(("probe", 6.0 + EJECTION_MAX_S))
    assert (later.ejections, later.reprobe_at) == (1, 7.0 + EJECTION_MAX_S + EJECTION_BASE_S)


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


@given(st.lists(st.booleans(), max_size=200))
def test_a_flapping_health_check_changes_the_state_no_faster_than_the_thresholds(
    outcomes: list[bool],
) -> None:
    # R8: whatever a health endpoint answers, an instance leaves "healthy" only after
    # SUSPECT_AFTER failed probes in a row, and passing and failing in turn never moves it.
    tracker = HealthTracker()
    changes, run, runs_long_enough = 0, 0, 0
    state = tracker.state
    for n, ok in enumerate(outcomes):
        run = 0 if ok else run + 1
        runs_long_enough += run == SUSPECT_AFTER
        # re-probe when due, the way the monitor does while it is out
        now = tracker.reprobe_at if tracker.state == "offline" else float(n)
        assert now is not None
        after = tracker.record(ok=ok, source="probe", now=now)
        if state == "healthy" and after != "healthy":
            changes += 1
        state = after
    assert changes <= runs_long_enough


def test_a_new_instance_is_unknown_until_a_probe_passes() -> None:
    tracker = HealthTracker()
    assert tracker.state == "unknown"
    assert tracker.record(ok=True, source="probe", now=1.0) == "healthy"


def test_an_instance_that_never_answered_is_never_suspect_only_out_after_offline_after() -> None:
    tracker = HealthTracker()
    states = [tracker.record(ok=False, source="probe", now=float(n)) for n in range(OFFLINE_AFTER)]
    assert states == ["unknown"] * (OFFLINE_AFTER - 1) + ["offline"]


def test_a_probe_sent_before_the_latest_failure_does_not_clear_it() -> None:
    # The probe sent at registration answers after the first deliveries already failed.
    tracker = HealthTracker(state="healthy")
    for _ in range(SUSPECT_AFTER):
        tracker.record(ok=False, source="delivery", now=2.0)
    assert tracker.record(ok=True, source="probe", now=2.5, sent_at=1.0) == "suspect"
    assert tracker.record(ok=True, source="probe", now=3.5, sent_at=3.0) == "healthy"
