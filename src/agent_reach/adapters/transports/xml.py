"""The `xml` transport: a plain XML-over-HTTP service reached with a document template."""

from __future__ import annotations

from agent_reach.adapters.transports.translated import TranslatingTransport
from agent_reach.wire import pool


def xml_transport(client: pool.HttpPool) -> TranslatingTransport:
    """`body` is the XML document template (values escaped); `response.map` XPath."""
    return TranslatingTransport(client, "xml")
