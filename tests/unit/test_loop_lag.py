"""The event-loop lag gauge keeps the worst lag of the last few seconds."""

from __future__ import annotations

from agent_reach.clock import ManualClock
from agent_reach.observability.loop_lag import WINDOW_S, LoopLagMonitor
from agent_reach.observability.metrics import Metrics


def gauge(metrics: Metrics) -> float:
    line = next(
        line
        for line in metrics.render().decode().splitlines()
        if line.startswith("agent_reach_event_loop_lag_seconds ")
    )
    return float(line.split()[1])


def test_the_worst_lag_of_the_window_is_kept_then_forgotten():
    clock, metrics = ManualClock(), Metrics()
    monitor = LoopLagMonitor(clock, metrics)
    assert monitor.observe(0.2, 10.0) == 0.2
    assert monitor.observe(0.01, 11.0) == 0.2
    assert gauge(metrics) == 0.2
    assert monitor.observe(0.03, 10.0 + WINDOW_S + 0.1) == 0.03
    assert gauge(metrics) == 0.03
