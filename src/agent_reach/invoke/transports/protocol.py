"""The Transport seam: how one delivery reaches one instance, whatever it speaks."""

from __future__ import annotations

from typing import Any, Protocol

from agent_reach.model.agents import TransportSpec
from agent_reach.model.delivery import Delivery


class Transport(Protocol):
    """One module per `transport.type`; the attempt loop only ever talks to this."""

    def check(self, spec: TransportSpec) -> None:
        """Refuse, with `ValidationFailed`, a registration this transport cannot deliver to."""

    async def deliver(
        self, spec: TransportSpec, delivery: Delivery, *, traceparent: str, timeout_s: float
    ) -> Any:
        """Deliver once and return the agent's decoded result (plain, or `Shaped` to
        say which normalization made it JSON; plain means "json").

        Raises `AgentUnreachable` when nothing reached the agent, `AgentTimeout` when no
        answer came within `timeout_s` (the agent may have acted), and `AgentFailed`
        for any answer that is not a success — with `retryable` False when the agent
        said so or the failure is the request's own (4xx), and `outcome_unknown` True
        for any failure once the delivery was sent (an unreadable answer included).
        Never retries by itself.
        """

    async def probe(self, spec: TransportSpec, *, timeout_s: float) -> bool:
        """True when the instance says it can work (its health check passes in time)."""

    async def aclose(self) -> None:
        """Release connections."""
