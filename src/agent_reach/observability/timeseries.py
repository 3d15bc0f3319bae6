"""The last 15 minutes of this coordinator's traffic, in memory, for the dashboard's charts.

Time is cut into `BUCKET_S` buckets; a ring keeps the buckets of the last `WINDOW_S`
and drops older ones as time moves on. Each bucket holds, per capability (requests)
and per instance (delivery attempts), how many there were, how many failed, how many
were refused, and their latencies in logarithmic bins (each `LATENCY_RATIO` wider than
the one below), from which p50 and p99 are read within 2 %. It also counts the text
routing decisions by their best calibrated confidence and by the margin to the
runner-up, in `CONFIDENCE_BINS` bins over [0, 1].

Memory is bounded: at most `MAX_SERIES` series per bucket (more fold into `OTHER`),
at most `WINDOW_S / BUCKET_S + 1` buckets. Recording is a few dict operations on the
event loop (one thread, no lock). Each coordinator keeps its own node's series.
"""

from __future__ import annotations

import math
from collections import deque
from math import ceil, log
from typing import Any, Literal

BUCKET_S = 5  # a live chart moves every 5 s; 180 points over the window
WINDOW_S = 900  # the last 15 minutes: what an operator looks at first
MAX_SERIES = 500  # series per bucket per kind; far above a real catalog's size
OTHER = "(other)"
LATENCY_RATIO = 1.04  # a bin's midpoint is within 2 % of every latency in it
_LOG_RATIO = math.log(LATENCY_RATIO)
_BIN_SCALE = 1 / _LOG_RATIO  # bin of a latency in s: ceil(log(s) * scale + shift), i.e. of ms
_BIN_SHIFT = math.log(1000) / _LOG_RATIO
_MIN_S = 0.00001  # shorter latencies share the lowest bin
CONFIDENCE_BINS = 20  # 0.05 wide: fine enough to see the thresholds' neighbourhood

Outcome = Literal["ok", "error", "refused"]
Kind = Literal["capabilities", "instances"]


class _Cell:
    """One series in one bucket; p50 and p99 are worked out once per change, when read."""

    __slots__ = ("count", "errors", "latency", "quantiles", "refusals")

    def __init__(self) -> None:
        self.count = 0
        self.errors = 0
        self.refusals = 0
        self.latency: dict[int, int] = {}  # log bin -> count
        self.quantiles: tuple[float | None, float | None] | None = None

    def add(self, latency_bin: int | None, outcome: Outcome) -> None:
        self.count += 1
        if outcome != "ok":
            if outcome == "error":
                self.errors += 1
            else:
                self.refusals += 1
        if latency_bin is not None:
            latency = self.latency
            latency[latency_bin] = latency.get(latency_bin, 0) + 1
            self.quantiles = None

    def p50_p99(self) -> tuple[float | None, float | None]:
        if self.quantiles is None:
            self.quantiles = (
                latency_quantile(self.latency, 0.5),
                latency_quantile(self.latency, 0.99),
            )
        return self.quantiles


class _Bucket:
    __slots__ = ("capabilities", "confidence", "end", "instances", "margin", "start", "total")

    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end
        self.capabilities: dict[str, _Cell] = {}
        self.instances: dict[str, _Cell] = {}
        self.total = _Cell()  # every request, whatever its capability
        self.confidence = [0] * CONFIDENCE_BINS
        self.margin = [0] * CONFIDENCE_BINS


class TrafficSeries:
    """Requests per capability, attempts per instance and routing confidences, by time."""

    def __init__(self, bucket_s: int = BUCKET_S, window_s: int = WINDOW_S) -> None:
        if bucket_s <= 0 or window_s % bucket_s:
            raise ValueError("window_s must be a positive multiple of bucket_s")
        self.bucket_s = bucket_s
        self.window_s = window_s
        self._buckets: deque[_Bucket] = deque(maxlen=window_s // bucket_s + 1)
        self._newest: _Bucket | None = None

    def request(
        self, at_s: float, capability: str, latency_s: float | None, outcome: Outcome
    ) -> None:
        """One request ended at wall time `at_s` (a refusal has no latency to count)."""
        bucket = self._newest  # on the request path: the common case first, inline
        if bucket is None or not bucket.start <= at_s < bucket.end:
            bucket = self._bucket(at_s)
        index = (
            None
            if latency_s is None
            else ceil(log(max(latency_s, _MIN_S)) * _BIN_SCALE + _BIN_SHIFT)
        )
        cells = bucket.capabilities
        (cells.get(capability) or _cell(cells, capability)).add(index, outcome)
        bucket.total.add(index, outcome)

    def attempt(self, at_s: float, instance: str, latency_s: float, outcome: Outcome) -> None:
        """One delivery attempt to `instance` ended."""
        bucket = self._newest
        if bucket is None or not bucket.start <= at_s < bucket.end:
            bucket = self._bucket(at_s)
        index = ceil(log(max(latency_s, _MIN_S)) * _BIN_SCALE + _BIN_SHIFT)
        cells = bucket.instances
        (cells.get(instance) or _cell(cells, instance)).add(index, outcome)

    def decision(self, at_s: float, confidence: float, margin: float | None) -> None:
        """A text routing decision: the best calibrated confidence and the gap to the
        runner-up (None when a single capability matched)."""
        bucket = self._bucket(at_s)
        bucket.confidence[_unit_bin(confidence)] += 1
        if margin is not None:
            bucket.margin[_unit_bin(margin)] += 1

    def snapshot(
        self, now_s: float, kinds: tuple[Kind, ...] = ("capabilities", "instances")
    ) -> dict[str, Any]:
        """The window ending at `now_s`: one value per bucket start in `times` for every
        series of `kinds` and their total (rates are left to the reader: a count over
        `bucket_s`; the newest bucket is still filling), and the routing histograms summed
        over the window."""
        newest = self._start(now_s)
        times = [newest - k * self.bucket_s for k in range(self.window_s // self.bucket_s)][::-1]
        position = {t: n for n, t in enumerate(times)}
        kept = [b for b in self._buckets if b.start in position]
        confidence = [0] * CONFIDENCE_BINS
        margin = [0] * CONFIDENCE_BINS
        for bucket in kept:
            confidence = [a + b for a, b in zip(confidence, bucket.confidence, strict=True)]
            margin = [a + b for a, b in zip(margin, bucket.margin, strict=True)]
        return {
            "bucket_s": self.bucket_s,
            "window_s": self.window_s,
            "now": now_s,
            "times": times,
            "total": _series([(b.start, b.total) for b in kept], position),
            **{kind: _by_name(kept, kind, position) for kind in kinds},
            "routing": {
                "bins": [round(n / CONFIDENCE_BINS, 4) for n in range(CONFIDENCE_BINS)],
                "confidence": confidence,
                "margin": margin,
            },
        }

    def _start(self, at_s: float) -> int:
        return int(at_s // self.bucket_s) * self.bucket_s

    def _bucket(self, at_s: float) -> _Bucket:
        newest = self._newest
        if newest is not None and newest.start <= at_s < newest.end:
            return newest
        start = self._start(at_s)
        buckets = self._buckets
        if buckets and buckets[-1].start >= start:
            for bucket in reversed(buckets):  # the clock stepped back: its own bucket, if kept
                if bucket.start == start:
                    return bucket
            return buckets[-1]
        bucket = self._newest = _Bucket(start, start + self.bucket_s)
        buckets.append(bucket)
        while buckets[0].start <= start - self.window_s:
            buckets.popleft()
        return bucket


def _cell(cells: dict[str, _Cell], name: str) -> _Cell:
    cell = cells.get(name)
    if cell is None:
        if len(cells) >= MAX_SERIES:
            name = OTHER
            cell = cells.get(name)
        if cell is None:
            cell = cells[name] = _Cell()
    return cell


def _by_name(
    kept: list[_Bucket], kind: Kind, position: dict[int, int]
) -> dict[str, dict[str, list[Any]]]:
    cells: dict[str, list[tuple[int, _Cell]]] = {}
    for bucket in kept:
        for name, cell in getattr(bucket, kind).items():
            cells.setdefault(name, []).append((bucket.start, cell))
    return {name: _series(found, position) for name, found in sorted(cells.items())}


def _series(found: list[tuple[int, _Cell]], position: dict[int, int]) -> dict[str, list[Any]]:
    size = len(position)
    series: dict[str, list[Any]] = {
        "requests": [0] * size,
        "errors": [0] * size,
        "refusals": [0] * size,
        "p50_ms": [None] * size,
        "p99_ms": [None] * size,
    }
    for start, cell in found:
        n = position[start]
        series["requests"][n] = cell.count
        series["errors"][n] = cell.errors
        series["refusals"][n] = cell.refusals
        series["p50_ms"][n], series["p99_ms"][n] = cell.p50_p99()
    return series


def latency_quantile(bins: dict[int, int], q: float) -> float | None:
    """The q-quantile (nearest rank) of binned latencies in ms, as its bin's midpoint."""
    total = sum(bins.values())
    if not total:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for index in sorted(bins):
        seen += bins[index]
        if seen >= rank:
            return round(math.exp((index - 0.5) * _LOG_RATIO), 3)
    raise AssertionError("unreachable: rank <= total")


def _unit_bin(value: float) -> int:
    return min(CONFIDENCE_BINS - 1, max(0, int(value * CONFIDENCE_BINS)))
