"""The one reading of pool errors as delivery failures: what was sent decides whether
the failure is unreachable (send again), unknown (may have acted) or the peer's answer."""

from __future__ import annotations

import pytest

from agent_reach.errors import AgentFailed, AgentTimeout, AgentUnreachable
from agent_reach.wire import pool
from agent_reach.wire.failures import Peer, delivery_failure

AGENT = Peer("the agent", sent="delivery")


def _unreadable(exc: pool.ResponseTooLarge | pool.InvalidResponse) -> AgentFailed:
    return AgentFailed(f"unreadable: {exc}", code="agent_bad_answer", retryable=False)


@pytest.mark.parametrize(
    ("error", "cls", "message", "details", "retryable"),
    [
        (
            pool.ConnectTimedOut("syn lost"),
            AgentUnreachable,
            "could not connect to the agent: syn lost",
            {"connect_timeout": True},
            True,
        ),
        (
            pool.ConnectFailed("refused"),
            AgentUnreachable,
            "could not connect to the agent: refused",
            {},
            True,
        ),
        (
            pool.RequestTimeout("late", sent=True),
            AgentTimeout,
            "no answer within 2.5 s",
            {"outcome_unknown": True},
            True,
        ),
        (
            pool.RequestTimeout("late", sent=False),
            AgentTimeout,
            "no answer within 2.5 s",
            {"outcome_unknown": False},
            True,
        ),
        (
            pool.ConnectionLost("reset", sent=False),
            AgentUnreachable,
            "the connection closed before the delivery was sent",
            {},
            True,
        ),
        (
            pool.ConnectionLost("reset", sent=True),
            AgentFailed,
            "the connection closed before the agent answered",
            {"outcome_unknown": True},
            True,
        ),
        (pool.InvalidResponse("junk"), AgentFailed, "unreadable: junk", {}, False),
        (pool.ResponseTooLarge("big"), AgentFailed, "unreadable: big", {}, False),
        (
            pool.PoolError("the pool is closed"),
            AgentUnreachable,
            "could not reach the agent: the pool is closed",
            {},
            True,
        ),
    ],
)
def test_each_pool_error_is_one_delivery_failure(error, cls, message, details, retryable):
    failure = delivery_failure(error, 2.5, AGENT, _unreadable)

    assert type(failure) is cls
    assert (failure.message, failure.details, failure.retryable) == (message, details, retryable)


def test_the_peer_names_the_other_end_in_the_messages():
    server = Peer("the MCP server")
    lost = delivery_failure(pool.ConnectionLost("reset", sent=False), 1, server, _unreadable)
    refused = delivery_failure(pool.ConnectFailed("refused"), 1, server, _unreadable)

    assert lost.message == "the connection closed before the request was sent"
    assert refused.message == "could not connect to the MCP server: refused"
