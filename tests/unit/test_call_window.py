"""The sliding window of the last calls: success rate and latency percentiles."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_reach.registry.stats import CallWindow


def test_an_empty_window_has_no_rate_and_no_latency():
    window = CallWindow()
    assert window.success_rate is None
    assert window.latency_ms(0.5) is None
    assert window.calls == 0


def test_the_oldest_call_falls_out_when_the_window_is_full():
    window = CallWindow(size=3)
    window.record(ok=False, latency_ms=900.0)
    for _ in range(3):
        window.record(ok=True, latency_ms=10.0)
    assert window.success_rate == 1.0
    assert window.latency_ms(0.99) == 10.0


calls = st.lists(st.tuples(st.booleans(), st.floats(0, 10_000, allow_nan=False)), max_size=200)


@given(calls, st.integers(1, 60), st.floats(0, 1))
def test_window_matches_a_naive_recomputation(history, size, quantile):
    window = CallWindow(size=size)
    for ok, latency in history:
        window.record(ok=ok, latency_ms=latency)
    last = history[-size:]
    if not last:
        assert window.success_rate is None
        return
    assert window.success_rate == sum(ok for ok, _ in last) / len(last)
    ordered = sorted(latency for _, latency in last)
    assert (
        window.latency_ms(quantile) == ordered[min(len(ordered) - 1, int(quantile * len(ordered)))]
    )


def test_forget_starts_a_clean_window_but_keeps_in_flight_calls():
    window = CallWindow()
    for _ in range(5):
        window.record(ok=False, latency_ms=2000.0)
    window.in_flight = 2
    window.forget()
    assert (window.calls, window.success_rate, window.latency_ms(0.5)) == (0, None, None)
    assert window.in_flight == 2
    window.record(ok=True, latency_ms=3.0)
    assert window.success_rate == 1.0
