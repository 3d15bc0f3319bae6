"""The dashboard's time series: buckets, the window, quantiles, bounds, routing histograms."""

from __future__ import annotations

import pytest

from agent_reach.observability.timeseries import (
    MAX_SERIES,
    OTHER,
    TrafficSeries,
    latency_quantile,
)

T0 = 1_700_000_000.0  # a bucket boundary for 5 s buckets


def test_requests_land_in_the_bucket_of_their_time_per_capability() -> None:
    series = TrafficSeries(bucket_s=5, window_s=60)
    series.request(T0 + 1, "order.track", 0.010, "ok")
    series.request(T0 + 4.9, "order.track", 0.020, "error")
    series.request(T0 + 5, "order.track", None, "refused")
    series.request(T0 + 6, "order.cancel", 0.030, "ok")

    snap = series.snapshot(T0 + 7)

    assert snap["times"][-2:] == [T0, T0 + 5]
    assert len(snap["times"]) == 12
    track = snap["capabilities"]["order.track"]
    assert (track["requests"][-2:], track["errors"][-2:], track["refusals"][-2:]) == (
        [2, 1],
        [1, 0],
        [0, 1],
    )
    assert track["p50_ms"][-1] is None  # a refusal has no latency
    assert snap["capabilities"]["order.cancel"]["requests"][-2:] == [0, 1]
    assert snap["total"]["requests"][-2:] == [2, 2]
    assert sum(snap["total"]["requests"]) == 4


def test_attempts_are_counted_per_instance() -> None:
    series = TrafficSeries(bucket_s=5, window_s=60)
    series.attempt(T0, "a-1", 0.1, "error")
    series.attempt(T0, "a-2", 0.1, "ok")
    series.attempt(T0, "a-2", 0.1, "refused")

    instances = series.snapshot(T0)["instances"]

    assert instances["a-1"]["errors"][-1] == 1
    assert (instances["a-2"]["requests"][-1], instances["a-2"]["refusals"][-1]) == (2, 1)
    assert series.snapshot(T0)["total"]["requests"][-1] == 0  # the total counts requests


def test_buckets_older_than_the_window_are_dropped() -> None:
    series = TrafficSeries(bucket_s=5, window_s=60)
    series.request(T0, "old", 0.01, "ok")
    series.request(T0 + 60, "new", 0.01, "ok")

    snap = series.snapshot(T0 + 60)

    assert "old" not in snap["capabilities"]
    assert snap["times"][0] == T0 + 5
    assert len(series._buckets) == 1  # the ring let it go, not only the view


def test_a_clock_stepping_back_lands_in_its_own_bucket_or_the_newest() -> None:
    series = TrafficSeries(bucket_s=5, window_s=60)
    series.request(T0, "c", 0.01, "ok")
    series.request(T0 + 10, "c", 0.01, "ok")
    series.request(T0 + 1, "c", 0.01, "ok")  # its bucket is kept: counted there
    series.request(T0 + 7, "c", 0.01, "ok")  # its bucket was never made: the newest one

    assert series.snapshot(T0 + 10)["capabilities"]["c"]["requests"][-3:] == [2, 0, 2]


@pytest.mark.parametrize("latency_ms", [0.3, 4.0, 87.0, 1234.0])
def test_quantiles_are_within_two_percent_of_the_latencies(latency_ms: float) -> None:
    series = TrafficSeries()
    for _ in range(10):
        series.request(T0, "c", latency_ms / 1000, "ok")

    cell = series.snapshot(T0)["capabilities"]["c"]

    assert cell["p50_ms"][-1] == pytest.approx(latency_ms, rel=0.02)
    assert cell["p99_ms"][-1] == pytest.approx(latency_ms, rel=0.02)


def test_p50_and_p99_are_nearest_ranks() -> None:
    series = TrafficSeries()
    for n in range(1, 101):  # 1 ms .. 100 ms
        series.request(T0, "c", n / 1000, "ok")

    cell = series.snapshot(T0)["capabilities"]["c"]

    assert cell["p50_ms"][-1] == pytest.approx(50, rel=0.02)
    assert cell["p99_ms"][-1] == pytest.approx(99, rel=0.02)
    assert latency_quantile({}, 0.5) is None


def test_series_beyond_the_bound_fold_into_other() -> None:
    series = TrafficSeries()
    for n in range(MAX_SERIES + 10):
        series.attempt(T0, f"i-{n}", 0.01, "ok")

    instances = series.snapshot(T0)["instances"]

    assert len(instances) == MAX_SERIES + 1
    assert instances[OTHER]["requests"][-1] == 10


def test_routing_decisions_are_binned_by_confidence_and_margin() -> None:
    series = TrafficSeries(bucket_s=5, window_s=60)
    series.decision(T0, 0.92, 0.4)
    series.decision(T0 + 5, 0.31, None)
    series.decision(T0 + 5, 1.0, 0.0)

    routing = series.snapshot(T0 + 5)["routing"]

    assert routing["bins"][:3] == [0.0, 0.05, 0.1]
    assert routing["confidence"][18] == 1  # 0.92
    assert routing["confidence"][6] == 1  # 0.31
    assert routing["confidence"][19] == 1  # 1.0: the top bin is closed
    assert routing["margin"][8] == 1 and routing["margin"][0] == 1
    assert sum(routing["margin"]) == 2


def test_a_window_that_is_not_whole_buckets_is_refused() -> None:
    with pytest.raises(ValueError, match="multiple"):
        TrafficSeries(bucket_s=7, window_s=60)


def test_quantiles_read_once_follow_later_requests() -> None:
    series = TrafficSeries()
    series.request(T0, "c", 0.010, "ok")
    assert series.snapshot(T0)["capabilities"]["c"]["p99_ms"][-1] == pytest.approx(10, rel=0.02)

    series.request(T0, "c", 0.500, "ok")

    assert series.snapshot(T0)["capabilities"]["c"]["p99_ms"][-1] == pytest.approx(500, rel=0.02)


def test_a_snapshot_of_one_kind_leaves_the_other_out() -> None:
    series = TrafficSeries()
    series.request(T0, "c", 0.01, "ok")
    series.attempt(T0, "i", 0.01, "ok")

    snap = series.snapshot(T0, ("instances",))

    assert "capabilities" not in snap
    assert list(snap["instances"]) == ["i"]
    assert snap["total"]["requests"][-1] == 1
