"""Every Redis store fails fast with `StoreUnavailable` while Redis is down, and heals.

The registry's outage tests (freeze, reopen, watch) live with its own suite.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from contract_kit import RedisOutage, assert_unavailable, once_answering

from agent_reach.backends.bundle import Backends

Operation = Callable[[Backends], Awaitable[object]]

OPERATIONS: dict[str, Operation] = {
    "idempotency.claim": lambda b: b.idempotency.claim("req-1", "fp", 60),
    "idempotency.complete": lambda b: b.idempotency.complete("req-1", 1, 200, b"{}", 60),
    "idempotency.release": lambda b: b.idempotency.release("req-1", 1),
    "idempotency.peek": lambda b: b.idempotency.peek("req-1"),
    "tasks.put": lambda b: b.tasks.put("task-1", b"{}", 60),
    "tasks.get": lambda b: b.tasks.get("task-1"),
    "answers.put": lambda b: b.answers.put("answer-1", b"{}", 60),
    "answers.get": lambda b: b.answers.get("answer-1"),
    "queues.push": lambda b: b.queues.push("suspended", b"{}"),
    "queues.pull": lambda b: b.queues.pull("suspended", "a", count=1, block_s=0, stale_s=60),
    "queues.pull_blocking": lambda b: b.queues.pull(
        "empty", "a", count=1, block_s=0.05, stale_s=60
    ),
    "queues.touch": lambda b: b.queues.touch("suspended", "a", ["1-0"]),
    "queues.ack": lambda b: b.queues.ack("suspended", "1-0"),
    "queues.depth": lambda b: b.queues.depth("suspended"),
    "journal.append": lambda b: b.journal.append("dead-letters", b"{}", 10),
    "journal.recent": lambda b: b.journal.recent("dead-letters", 10),
    "journal.count": lambda b: b.journal.count("dead-letters"),
}


@pytest.mark.redis
@pytest.mark.parametrize("operation", OPERATIONS.values(), ids=OPERATIONS.keys())
async def test_operation_fails_fast_while_redis_is_down_and_works_again_after_restart(
    outage: RedisOutage, operation: Operation
) -> None:
    await operation(outage.backends)

    await outage.stop()
    await assert_unavailable(operation(outage.backends))

    await outage.start()
    await once_answering(lambda: operation(outage.backends))
