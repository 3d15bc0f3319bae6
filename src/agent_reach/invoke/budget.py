"""Retry budget and backoff: how much extra load retries may add, and how long to pause."""

from __future__ import annotations

import random

from agent_reach.policy.delivery import DeliveryPolicy

_rng = random.Random()  # our own: callers seeding `random` do not steer jitter


class RetryBudget:
    """Retries in flight may not exceed `ratio` x requests in flight (and at least `minimum`).

    A retry storm cannot multiply the load on agents: when every request is failing,
    at most a fifth of them (by default) are retried at once (Envoy, Linkerd).
    """

    def __init__(self) -> None:
        self.requests = 0
        self.retries = 0

    def start_request(self) -> None:
        self.requests += 1

    def end_request(self) -> None:
        self.requests -= 1

    def try_retry(self, policy: DeliveryPolicy) -> bool:
        """Take a retry slot if the budget allows; the caller must `end_retry` after."""
        allowed = max(policy.retry_budget_min, policy.retry_budget_ratio * self.requests)
        if self.retries + 1 > allowed:
            return False
        self.retries += 1
        return True

    def end_retry(self) -> None:
        self.retries -= 1


def backoff_pause(policy: DeliveryPolicy, retry: int, left_s: float) -> float:
    """The jittered pause before re-send number `retry`, never past what is left."""
    pause = policy.backoff(retry) * _rng.uniform(1 - policy.jitter, 1 + policy.jitter)
    return max(0.0, min(pause, left_s))
