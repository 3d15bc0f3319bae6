"""Every Prometheus metric Agent-Reach exports: names live here and nowhere else.

Each coordinator owns one `Metrics` with its own registry, so several coordinators
in one process (tests, the demo) never mix their numbers. Tests read these
counters as their oracle for routing and reliability decisions.
"""

from __future__ import annotations

from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

T = TypeVar("T", Counter, Histogram)

LATENCY_BUCKETS_S = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # from half a millisecond (a routing decision) to the long class's 30 s


class Metrics:
    """The coordinator's metrics; `render` gives the Prometheus text format."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "agent_reach_requests", "Invocations by capability and final status",
            ["capability", "status"], registry=r,
        )
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self.request_seconds = Histogram(
            "agent_reach_request_seconds", "End-to-end invoke latency by capability",
            ["capability"], buckets=LATENCY_BUCKETS_S, registry=r,
        )
        self.route_seconds = Histogram(
            "agent_reach_route_seconds", "Routing decision latency",
            buckets=LATENCY_BUCKETS_S, registry=r,
        )
        self.attempt_seconds = Histogram(
            "agent_reach_attempt_seconds", "One delivery attempt by outcome",
            ["outcome"], buckets=LATENCY_BUCKETS_S, registry=r,
        )
        self.retries = Counter(
            "agent_reach_retries", "Attempts after the first: a re-send or the next instance",
            ["kind"], registry=r,
        )
        self.retry_budget_exhausted = Counter(
            "agent_reach_retry_budget_exhausted", "Retries refused by the retry budget",
            registry=r,
        )
        self.fallbacks = Counter(
            "agent_reach_fallbacks", "Fallback chain stages taken",
            ["stage"], registry=r,
        )
        self.health_transitions = Counter(
            "agent_reach_health_transitions", "Instance health state changes",
            ["state"], registry=r,
        )
        self.probes = Counter(
            "agent_reach_probes", "Active health probes by result", ["result"], registry=r,
        )
        self.idempotent_replays = Counter(
            "agent_reach_idempotent_replays", "Repeated request ids answered from the store",
            registry=r,
        )
        self.dead_letters = Counter(
            "agent_reach_dead_letters", "Requests dead-lettered, by reason", ["reason"], registry=r,
        )
        self.quota_denials = Counter(
            "agent_reach_quota_denials", "Requests refused by a quota", ["capability"], registry=r,
        )
        self.instances = Gauge(
            "agent_reach_instances", "Registered instances by health state", ["state"], registry=r,
        )
        self.queue_depth = Gauge(
            "agent_reach_queue_depth", "Entries waiting in a queue", ["queue"], registry=r,
        )

    def request_seconds_of(self, capability: str) -> Histogram:
        """`request_seconds` for one capability; cached, as `labels()` costs ~2 µs a call."""
        return self.child(self.request_seconds, capability)

    def child(self, metric: T, *labels: str) -> T:
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
