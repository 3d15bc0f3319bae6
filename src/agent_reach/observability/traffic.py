"""Per-capability traffic from two scrapes of `GET /metrics`, for `agent-reach top`.

Rates are the counters' growth between the scrapes; p50 and p99 are interpolated
inside the `agent_reach_request_seconds` buckets as Prometheus' `histogram_quantile`
does, over the requests that finished between the two scrapes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

REQUESTS = "agent_reach_requests"
REQUEST_SECONDS = "agent_reach_request_seconds"
ERROR_STATUS = "error"


@dataclass(slots=True)
class Scrape:
    """What one scrape says: requests by (capability, status), latency buckets by capability."""

    at_s: float
    requests: dict[tuple[str, str], float] = field(default_factory=dict)
    buckets: dict[str, dict[float, float]] = field(default_factory=lambda: defaultdict(dict))


@dataclass(frozen=True, slots=True)
class Traffic:
    """One capability between two scrapes (`total` and `errors` count since the start)."""

    capability: str
    requests_per_s: float
    errors_per_s: float
    total: int
    errors: int
    p50_ms: float | None
    p99_ms: float | None


def parse_scrape(text: str, at_s: float) -> Scrape:
    """The request counters and latency buckets of a Prometheus text exposition."""
    scrape = Scrape(at_s)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if sample.name == f"{REQUESTS}_total":
                scrape.requests[(labels["capability"], labels["status"])] = sample.value
            elif sample.name == f"{REQUEST_SECONDS}_bucket":
                scrape.buckets[labels["capability"]][float(labels["le"])] = sample.value
    return scrape


def traffic(before: Scrape, after: Scrape) -> list[Traffic]:
    """Each capability seen in `after`, busiest first."""
    span_s = max(after.at_s - before.at_s, 1e-9)
    capabilities = {c for c, _ in after.requests} | set(after.buckets)
    rows = []
    for capability in capabilities:
        total = _count(after, capability)
        errors = after.requests.get((capability, ERROR_STATUS), 0.0)
        new = _bucket_growth(before.buckets.get(capability, {}), after.buckets.get(capability, {}))
        rows.append(
            Traffic(
                capability=capability,
                requests_per_s=(total - _count(before, capability)) / span_s,
                errors_per_s=(errors - before.requests.get((capability, ERROR_STATUS), 0.0))
                / span_s,
                total=int(total),
                errors=int(errors),
                p50_ms=_ms(quantile(0.5, new)),
                p99_ms=_ms(quantile(0.99, new)),
            )
        )
    return sorted(rows, key=lambda r: (-r.requests_per_s, -r.total, r.capability))


def quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """The q-quantile of cumulative `(upper bound, count)` buckets; None with no observation.

    Linear interpolation inside the bucket that holds it; in the `+Inf` bucket, the
    highest finite bound (what Prometheus answers).
    """
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            share = (rank - lower_count) / (count - lower_count)
            return lower_bound + (bound - lower_bound) * share
        lower_bound, lower_count = bound, count
    return lower_bound


def _count(scrape: Scrape, capability: str) -> float:
    return sum(v for (c, _), v in scrape.requests.items() if c == capability)


def _bucket_growth(
    before: dict[float, float], after: dict[float, float]
) -> list[tuple[float, float]]:
    return [(bound, count - before.get(bound, 0.0)) for bound, count in sorted(after.items())]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000
