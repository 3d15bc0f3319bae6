"""Event-loop lag: how late a timer fires, the sign of a loop too busy to serve.

A background task sleeps `TICK_S` again and again; each wake-up later than asked is
lag. The largest lag of the last `WINDOW_S` is the `agent_reach_event_loop_lag_seconds`
gauge (docs/overload.md: under overload it must stay below 100 ms).
"""

from __future__ import annotations

import asyncio
from collections import deque

from agent_reach.clock import Clock
from agent_reach.observability.metrics import Metrics

TICK_S = 0.05  # finer than the 100 ms the overload goal allows
WINDOW_S = 5.0  # a scrape every few seconds still sees the worst moment between scrapes


class LoopLagMonitor:
    """Measures lag on the running loop and keeps the recent maximum in the gauge."""

    def __init__(self, clock: Clock, metrics: Metrics) -> None:
        self.clock = clock
        self.metrics = metrics
        self._recent: deque[tuple[float, float]] = deque()

    def observe(self, lag_s: float, now: float) -> float:
        """Add one measurement; the largest lag of the window, also set on the gauge."""
        recent = self._recent
        recent.append((now, lag_s))
        while recent[0][0] < now - WINDOW_S:
            recent.popleft()
        worst = max(lag for _, lag in recent)
        self.metrics.loop_lag.set(worst)
        return worst

    async def run(self) -> None:
        """Measure until cancelled."""
        while True:
            asked = self.clock.monotonic() + TICK_S
            await asyncio.sleep(TICK_S)
            now = self.clock.monotonic()
            self.observe(max(0.0, now - asked), now)
