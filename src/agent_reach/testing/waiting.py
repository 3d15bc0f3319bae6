"""Wait for a condition by polling it, with a deadline that fails loudly."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import httpx

T = TypeVar("T")

POLL_S = 0.02


class WaitTimedOut(AssertionError):
    """The condition did not hold before the deadline."""


def wait_until(predicate: Callable[[], T], what: str, timeout_s: float = 10.0) -> T:
    """Call `predicate` until it returns something truthy and return that.

    Raises `WaitTimedOut` naming `what` when `timeout_s` passes first; tests use it
    instead of sleeping for a guessed time.
    """
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise WaitTimedOut(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(POLL_S)
    return value


def wait_all_healthy(coordinator: httpx.Client) -> None:
    """Wait for the probes sent at registration to pass on every agent the coordinator
    lists: an instance no probe has answered yet is scored below one that has, so a
    weight alone would not put it first."""
    wait_until(
        lambda: (
            {a["status"] for a in coordinator.get("/v1/agents").json()["agents"]} == {"healthy"}
        ),
        "the probes sent at registration to pass",
    )
