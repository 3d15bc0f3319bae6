"""bench/overhead.py: ratios come from each repeat's own runs, seconds apart."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).parents[2] / "bench" / "overhead.py"


def _runs(bench: ModuleType, concurrency: int, rps: dict[str, list[float]]) -> list[object]:
    return [
        bench.Result(target, concurrency, value, 1.0, 2.0, 3.0, 0, 0, 10.0, repeat)
        for target, values in rps.items()
        for repeat, value in enumerate(values)
    ]


def test_each_repeat_is_its_own_ratio_and_the_median_of_them_decides(bench):
    # The machine slows down between repeats: the coordinator's req/s halves, nginx's
    # barely moves. Repeat by repeat the coordinator makes 0.22, 0.21 and 0.20 of nginx.
    runs = _runs(
        bench,
        64,
        {
            "direct": [100_000.0, 100_000.0, 100_000.0],
            "nginx": [40_000.0, 40_000.0, 20_000.0],
            "coordinator": [8_800.0, 8_400.0, 4_000.0],
        },
    )
    [row] = bench.summarize(runs)
    assert row.nginx_share_runs == [0.22, 0.21, 0.2]
    assert row.coordinator_over_nginx == pytest.approx(0.21)
    assert row.goal_met is True  # the ratio of the medians, 8,400 / 40,000, is also 0.21
    # When they disagree, the repeats' own ratios count:
    runs = _runs(
        bench,
        64,
        {
            "direct": [100_000.0] * 3,
            "nginx": [44_000.0, 30_000.0, 30_000.0],
            "coordinator": [8_800.0, 6_300.0, 6_000.0],
        },
    )
    [row] = bench.summarize(runs)
    assert row.nginx_share_runs == [0.2, 0.21, 0.2]
    assert row.coordinator_over_nginx == pytest.approx(0.2)  # not 6,300 / 30,000 = 0.21
    [coordinator] = [r for r in bench.medians(runs) if r.target == "coordinator"]
    assert coordinator.rps == 6_300.0


def test_the_c64_goal_needs_the_share_and_the_p99(bench):
    runs = _runs(bench, 64, {"direct": [100_000.0], "nginx": [40_000.0], "coordinator": [9_000.0]})
    for run in runs:
        run.p99_ms = 25.0
    [row] = bench.summarize(runs)
    assert row.coordinator_over_nginx == pytest.approx(0.225)
    assert row.goal_met is False  # p99 over 20 ms
