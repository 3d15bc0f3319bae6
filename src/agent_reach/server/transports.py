"""The transports a coordinator delivers over: every built-in type, chosen here.

The invoke path knows only the `Transport` protocol and the `Transports` table; the
types that translate (A2A, templates, XML, SOAP: `adapters/transports/`) and the MCP
transport (`federation/`) are put in the table by the composition root.
"""

from __future__ import annotations

import ssl

from agent_reach.adapters.transports.a2a import A2ATransport
from agent_reach.adapters.transports.http_template import http_template_transport
from agent_reach.adapters.transports.soap import soap_transport
from agent_reach.adapters.transports.xml import xml_transport
from agent_reach.federation.transport import McpTransport
from agent_reach.invoke.transports import Transports
from agent_reach.invoke.transports.http import HttpTransport
from agent_reach.registry.service import Registry
from agent_reach.wire.pool import HttpPool, Resolve


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


def follow_tool_lists(transports: Transports, registry: Registry) -> None:
    """MCP servers' tool lists, followed into their registrations (`federation/`)."""
    mcp = transports.table.get("mcp")
    if isinstance(mcp, McpTransport):
        mcp.follow(registry)
