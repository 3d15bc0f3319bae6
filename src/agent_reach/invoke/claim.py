"""The claim stage: a request id is answered once (`invoke/idempotency.py`).

A caller-chosen request id is claimed before the request is routed: a duplicate gets
the first one's stored answer (or waits for it, `on_duplicate: "wait"`, within the
caller's deadline, else the longest class's), and the owner notes every instance it
sends the request to. A task run later is claimed under its own key, so that a task
taken over from a dead coordinator is re-sent only to an idempotent instance.
"""

from __future__ import annotations

from collections.abc import Awaitable

from agent_reach.invoke.idempotency import IdempotencyGuard, Owned, fingerprint
from agent_reach.invoke.tasks import TaskEntry
from agent_reach.policy.policy import Policy
from agent_reach.wire.answer import Answer


class ClaimStage:
    """Claims requests and tasks; a stored answer when one was given already."""

    def __init__(self, guard: IdempotencyGuard) -> None:
        self.guard = guard

    def claim(self, task: TaskEntry, policy: Policy, now: float) -> Awaitable[Answer | Owned]:
        """The request's claim (it names its own id); the first answer for a duplicate."""
        request = task.request
        return self.guard.claim(
            request,
            task.key,
            lease_s=policy.longest_deadline_s,
            deadline=now + wait_limit_s(task.deadline_ms, policy),
            wait=request.on_duplicate == "wait",
        )

    def claim_run(self, task: TaskEntry, policy: Policy, now: float) -> Awaitable[Answer | Owned]:
        """A queued or parked task's claim, under its own key (the request id's record
        holds the 202), waiting for a live owner up to the longest class."""
        return self.guard.claim_key(
            f"task-run:{task.key}",
            fingerprint(task.request),
            lease_s=policy.longest_deadline_s,
            deadline=now + policy.longest_deadline_s,
            wait=True,
        )


def wait_limit_s(deadline_ms: int | None, policy: Policy) -> float:
    """How long a duplicate waits for the first: the caller's deadline, else the longest class."""
    longest = policy.longest_deadline_s
    return longest if deadline_ms is None else deadline_ms / 1000
