"""The `http-template` transport: any JSON, form-encoded or query-string HTTP endpoint."""

from __future__ import annotations

from agent_reach.adapters.transports.translated import TranslatingTransport
from agent_reach.wire import pool


def http_template_transport(client: pool.HttpPool) -> TranslatingTransport:
    """`method`, `path`, `query`, `headers`, `body` (JSON with templates) or `form`;
    `response.map` jmespath (or XPath with `response.format: xml`)."""
    return TranslatingTransport(client, "json")
