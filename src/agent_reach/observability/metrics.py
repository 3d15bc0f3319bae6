"""Every Prometheus metric Agent-Reach exports: names live here and nowhere else.

Each coordinator owns one `Metrics` with its own registry, so several coordinators
in one process (tests, the demo) never mix their numbers. Tests read these
counters as their oracle for routing and reliability decisions.

The four metrics every request touches are kept by `HotCounter`/`HotHistogram`:
plain numbers bumped on the event loop (one thread, so no lock) and handed to
prometheus-client at scrape time by a collector. prometheus-client's own metrics
take a lock per increment, which cost ~4 % of the coordinator's CPU per request.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from agent_reach.observability.timeseries import TrafficSeries

LATENCY_BUCKETS_S = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)  # from half a millisecond (a routing decision) to the long class's 30 s


class _Bucketed:
    """One label set of a `HotHistogram`: counts per bucket and the running sum."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS_S) + 1)  # the last one is +Inf
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(LATENCY_BUCKETS_S, value)] += 1
        self.total += value


class _Count:
    """One label set of a `HotCounter`."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount


class _Hot(Collector):
    """Children by label values, made on first use and exported at scrape time."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...]) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = labelnames
        self.children: dict[tuple[str, ...], Any] = {}

    def describe(self) -> Iterator[Metric]:
        return iter(())  # no up-front description: the collector is read at every scrape


class HotCounter(_Hot):
    """A counter (with labels) for the request path."""

    def labels(self, *values: str) -> _Count:
        child = self.children.get(values)
        if child is None:
            child = self.children[values] = _Count()
        return child

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, child in self.children.items():
            family.add_metric(list(values), child.value)
        yield family


class HotHistogram(_Hot):
    """A latency histogram (with or without labels) for the request path."""

    def labels(self, *values: str) -> _Bucketed:
        child = self.children.get(values)
        if child is None:
            child = self.children[values] = _Bucketed()
        return child

    def observe(self, value: float) -> None:
        """For a histogram without labels."""
        self.labels().observe(value)

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, child in self.children.items():
            cumulative, buckets = 0, []
            for bound, count in zip((*LATENCY_BUCKETS_S, float("inf")), child.counts, strict=True):
                cumulative += count
                buckets.append((_bound(bound), cumulative))
            family.add_metric(list(values), buckets, child.total)
        yield family


def _bound(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


class Metrics:
    """The coordinator's metrics; `render` gives the Prometheus text format."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = HotCounter(
            "agent_reach_requests",
            "Invocations by capability and final status",
            ("capability", "status"),
        )
        self.request_seconds = HotHistogram(
            "agent_reach_request_seconds",
            "End-to-end invoke latency by capability",
            ("capability",),
        )
        self.route_seconds = HotHistogram(
            "agent_reach_route_seconds", "Routing decision latency", ()
        )
        self.attempt_seconds = HotHistogram(
            "agent_reach_attempt_seconds", "One delivery attempt by outcome", ("outcome",)
        )
        for hot in (self.requests, self.request_seconds, self.route_seconds, self.attempt_seconds):
            r.register(hot)
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self.retries = Counter(
            "agent_reach_retries",
            "Attempts after the first: a re-send or the next instance",
            ["kind"],
            registry=r,
        )
        self.retry_budget_exhausted = Counter(
            "agent_reach_retry_budget_exhausted",
            "Retries refused by the retry budget",
            registry=r,
        )
        self.fallbacks = Counter(
            "agent_reach_fallbacks",
            "Fallback chain stages taken",
            ["stage"],
            registry=r,
        )
        self.routing_feedback = Counter(
            "agent_reach_routing_feedback",
            "Examples the router learned: positive (a correction) or negative (a 421)",
            ["kind"],
            registry=r,
        )
        self.misdirected = Counter(
            "agent_reach_misdirected",
            "421 'not mine' answers to text requests, by what followed",
            ["outcome"],
            registry=r,
        )
        self.health_transitions = Counter(
            "agent_reach_health_transitions",
            "Instance health state changes",
            ["state"],
            registry=r,
        )
        self.probes = Counter(
            "agent_reach_probes",
            "Active health probes by result",
            ["result"],
            registry=r,
        )
        self.idempotent_replays = Counter(
            "agent_reach_idempotent_replays",
            "Repeated request ids answered from the store",
            registry=r,
        )
        self.dead_letters = Counter(
            "agent_reach_dead_letters",
            "Requests dead-lettered, by reason",
            ["reason"],
            registry=r,
        )
        self.quota_denials = Counter(
            "agent_reach_quota_denials",
            "Requests refused by a quota",
            ["capability"],
            registry=r,
        )
        self.instances = Gauge(
            "agent_reach_instances",
            "Registered instances by health state",
            ["state"],
            registry=r,
        )
        self.queue_depth = Gauge(
            "agent_reach_queue_depth",
            "Entries waiting in a queue",
            ["queue"],
            registry=r,
        )
        self.workflow_runs = Counter(
            "agent_reach_workflow_runs",
            "Workflow runs settled, by status (ok, partial, parked, error)",
            ["status"],
            registry=r,
        )
        self.workflow_steps = Counter(
            "agent_reach_workflow_steps",
            "Workflow steps settled, by status (ok, fallback, failed, skipped, parked)",
            ["status"],
            registry=r,
        )
        self.workflow_run_seconds = HotHistogram(
            "agent_reach_workflow_run_seconds", "Workflow runs from creation to their end", ()
        )
        r.register(self.workflow_run_seconds)

        self.shed = Counter(
            "agent_reach_shed",
            "Requests refused by admission control, by limit and by the answer they got",
            ["limit", "answer"],
            registry=r,
        )
        self.in_flight = Gauge(
            "agent_reach_in_flight", "Invocations this coordinator holds now", registry=r
        )
        self.loop_lag = Gauge(
            "agent_reach_event_loop_lag_seconds",
            "Largest event-loop lag over the last few seconds",
            registry=r,
        )
        self.encoder_up = Gauge(
            "agent_reach_encoder_up",
            "1 while the remote sentence encoder answers, 0 while the packaged one stands in",
            ["encoder"],
            registry=r,
        )
        self.encoder_calls = Counter(
            "agent_reach_encoder_calls",
            "Calls to the remote embeddings service by outcome "
            "(ok, timeout, error, status, malformed)",
            ["outcome"],
            registry=r,
        )
        self.encoder_served = Counter(
            "agent_reach_encoder_served",
            "Texts the embedding matcher scored, by the encoder that embedded them",
            ["encoder"],
            registry=r,
        )
        self.recent = TrafficSeries()  # not exported: the last 15 minutes, for the dashboard

    def request_seconds_of(self, capability: str) -> _Bucketed:
        """`request_seconds` for one capability."""
        found = self.request_seconds.children.get((capability,))  # labels(), inline: per request
        return self.request_seconds.labels(capability) if found is None else found

    def child(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, cached: the hot path asks for the same few every time.

        Callers pass only bounded label values (registered capabilities, outcome codes).
        """
        key = (id(metric), labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def render(self) -> bytes:
        return generate_latest(self.registry)
