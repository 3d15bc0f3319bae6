"""Transports by `transport.type`: one module each behind the `Transport` protocol."""

from __future__ import annotations

import ssl

from agent_reach.errors import ValidationFailed
from agent_reach.invoke.transports.a2a import A2ATransport
from agent_reach.invoke.transports.http import HttpTransport
from agent_reach.invoke.transports.http_template import http_template_transport
from agent_reach.invoke.transports.mcp import McpTransport
from agent_reach.invoke.transports.protocol import Transport
from agent_reach.invoke.transports.soap import soap_transport
from agent_reach.invoke.transports.xml import xml_transport
from agent_reach.model.agents import TransportSpec
from agent_reach.registry.service import Registry
from agent_reach.wire.pool import HttpPool, Resolve


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

    def follow_tool_lists(self, registry: Registry) -> None:
        """MCP servers' tool lists, followed into their registrations (`federation/`)."""
        mcp = self.table.get("mcp")
        if isinstance(mcp, McpTransport):
            mcp.follow(registry)

    async def aclose(self) -> None:
        for transport in self.table.values():
            await transport.aclose()


def open_transports(
    resolve: Resolve | None = None, ssl_context: ssl.SSLContext | None = None
) -> Transports:
    """Every built-in transport, sharing one pooled HTTP client.

    `resolve` picks (and may refuse) the address of every new connection: the dial-time
    half of the endpoint guard. `ssl_context`: how https agents are verified and what
    client certificate they are shown (`identity.tls.delivery_context`).
    """
    client = HttpPool(resolve=resolve, ssl_context=ssl_context)
    return Transports(
        {
            "http": HttpTransport(client),
            "http-template": http_template_transport(client),
            "xml": xml_transport(client),
            "soap": soap_transport(client),
            "a2a": A2ATransport(client),
            "mcp": McpTransport(client),
        }
    )


__all__ = ["A2ATransport", "McpTransport", "Transport", "Transports", "open_transports"]
