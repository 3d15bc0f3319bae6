"""The `soap` transport: a SOAP 1.1/1.2 service reached with an envelope template."""

from __future__ import annotations

from agent_reach.adapters.transports.translated import TranslatingTransport
from agent_reach.wire import pool


def soap_transport(client: pool.HttpPool) -> TranslatingTransport:
    """`soap_version`, `soap_action`, `body` (the Body's XML template), `response.map`
    (XPath; the `soap` prefix is the envelope's namespace); faults answer `soap_fault`."""
    return TranslatingTransport(client, "soap")
