"""The one reading of the pool's errors as delivery failures: whether anything was sent,
so whether the other end may have acted (docs/delivery.md).

Nothing sent (connect refused or timed out, reset before the write, the pool closed) is
`AgentUnreachable`, safe to send again; once the request was written, no answer in time
is `AgentTimeout` and a lost connection `AgentFailed`, both `outcome_unknown`. An answer
that is too large or not HTTP is for the caller to word (`unreadable`): the other end
did answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agent_reach.errors import AgentFailed, AgentTimeout, AgentUnreachable
from agent_reach.wire import pool


@dataclass(frozen=True, slots=True)
class Peer:
    """How the failures' messages name the other end and what was sent to it."""

    name: str  # "the agent", "the MCP server"
    sent: str = "request"  # "delivery" under the agent contract


def delivery_failure(
    exc: pool.PoolError,
    timeout_s: float,
    peer: Peer,
    unreadable: Callable[[pool.ResponseTooLarge | pool.InvalidResponse], AgentFailed],
) -> AgentFailed:
    """What a pool error says about `peer` (see the module docstring)."""
    if isinstance(exc, pool.ConnectTimedOut):
        # Under load a full listen backlog drops SYNs: weaker evidence than a refusal.
        return AgentUnreachable(f"could not connect to {peer.name}: {exc}", connect_timeout=True)
    if isinstance(exc, pool.ConnectFailed):
        return AgentUnreachable(f"could not connect to {peer.name}: {exc}")
    if isinstance(exc, pool.RequestTimeout):
        return AgentTimeout(f"no answer within {timeout_s:g} s", outcome_unknown=exc.sent)
    if isinstance(exc, pool.ConnectionLost):
        if not exc.sent:
            return AgentUnreachable(f"the connection closed before the {peer.sent} was sent")
        return AgentFailed(
            f"the connection closed before {peer.name} answered", outcome_unknown=True
        )
    if isinstance(exc, pool.ResponseTooLarge | pool.InvalidResponse):
        return unreadable(exc)
    return AgentUnreachable(f"could not reach {peer.name}: {exc}")  # the pool is closed
