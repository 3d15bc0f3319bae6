"""Transports by `transport.type`: one module each behind the `Transport` protocol.

The table is filled by the composition root (`server/transports.py`); here live the
protocol, the table and the `http` transport.
"""

from __future__ import annotations

from agent_reach.errors import ValidationFailed
from agent_reach.invoke.transports.protocol import Transport
from agent_reach.model.agents import TransportSpec


class Transports:
    """The transports one coordinator can deliver over."""

    def __init__(self, table: dict[str, Transport]) -> None:
        self.table = table

    def get(self, kind: str) -> Transport:
        transport = self.table.get(kind)
        if transport is None:
            raise ValidationFailed(
                f"unknown transport type {kind!r}: use one of {sorted(self.table)}",
                field="transport.type",
            )
        return transport

    def check(self, spec: TransportSpec) -> None:
        """Refuse a registration no transport here can deliver to."""
        self.get(spec.type).check(spec)

    async def aclose(self) -> None:
        for transport in self.table.values():
            await transport.aclose()


__all__ = ["Transport", "Transports"]
