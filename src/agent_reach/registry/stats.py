"""What one coordinator has seen of an instance: in-flight load and the last calls."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import deque

WINDOW_CALLS = 50  # success rate and latency over the last 50 calls


class CallWindow:
    """A sliding window of the last `size` calls: success rate and latency percentiles.

    Latencies are also kept sorted (bisect, at most `size` of them), so routing can
    read a percentile on every request without sorting.
    """

    __slots__ = ("_calls", "_failures", "_sorted", "in_flight", "remote_in_flight")

    def __init__(self, size: int = WINDOW_CALLS) -> None:
        self._calls: deque[tuple[bool, float]] = deque(maxlen=size)
        self._failures = 0
        self._sorted: list[float] = []
        self.in_flight = 0
        self.remote_in_flight = 0  # the other coordinators' count, from the fleet load

    def record(self, *, ok: bool, latency_ms: float) -> None:
        """Add one finished call; the oldest falls out when the window is full."""
        calls, ordered = self._calls, self._sorted
        if len(calls) == calls.maxlen:
            old_ok, old_latency = calls[0]
            self._failures -= not old_ok
            del ordered[bisect_left(ordered, old_latency)]
        calls.append((ok, latency_ms))
        self._failures += not ok
        insort(ordered, latency_ms)

    def forget(self) -> None:
        """Drop the call history (in-flight counts stay): a fresh start after readmission."""
        self._calls.clear()
        self._sorted.clear()
        self._failures = 0

    @property
    def calls(self) -> int:
        return len(self._calls)

    @property
    def success_rate(self) -> float | None:
        """Share of successful calls in the window, or None before the first call."""
        n = len(self._calls)
        return (n - self._failures) / n if n else None

    def latency_ms(self, quantile: float) -> float | None:
        """Latency at `quantile` (0..1) over the window, or None before the first call."""
        ordered = self._sorted
        if not ordered:
            return None
        return ordered[min(len(ordered) - 1, int(quantile * len(ordered)))]
