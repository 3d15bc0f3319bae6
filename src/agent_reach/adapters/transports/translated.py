"""Transports that translate a delivery for a service no sidecar can sit next to.

The translation lives in the registration's `transport` (everything beside `type`,
`endpoint` and `health_endpoint`, see `adapters.translation`); it is compiled when the
agent registers and again only when the registration changes.
"""

from __future__ import annotations

from typing import Any

import orjson

from agent_reach.adapters.exchange import call_service, variables_of
from agent_reach.adapters.translation import CompiledTranslation, Kind, parse_translation
from agent_reach.model.agents import TransportSpec
from agent_reach.model.delivery import Delivery
from agent_reach.wire import pool
from agent_reach.wire.urls import check_endpoints, health_url

_CACHE_SIZE = 1024  # distinct translations compiled; registrations are few


class TranslatingTransport:
    """A `Transport` that speaks one kind of service request (json, xml or soap)."""

    def __init__(self, client: pool.HttpPool, kind: Kind) -> None:
        self.client = client
        self.kind = kind
        self._compiled: dict[bytes, CompiledTranslation] = {}

    def check(self, spec: TransportSpec) -> None:
        check_endpoints(spec)
        self.translation(spec)

    def translation(self, spec: TransportSpec) -> CompiledTranslation:
        """The spec's compiled translation (`ValidationFailed` when it is wrong)."""
        extra = spec.model_extra or {}
        key = orjson.dumps(extra, option=orjson.OPT_SORT_KEYS)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = CompiledTranslation(parse_translation(extra, self.kind, "transport"))
            if len(self._compiled) >= _CACHE_SIZE:
                self._compiled.clear()
            self._compiled[key] = compiled
        return compiled

    async def deliver(
        self, spec: TransportSpec, delivery: Delivery, *, traceparent: str, timeout_s: float
    ) -> Any:
        return await call_service(
            self.client,
            self.translation(spec),
            spec.endpoint,
            variables_of(delivery),
            headers=[("x-request-id", delivery.request_id), ("traceparent", traceparent)],
            timeout_s=timeout_s,
        )

    async def probe(self, spec: TransportSpec, *, timeout_s: float) -> bool:
        return await self.client.probe(health_url(spec), timeout_s=timeout_s)

    async def aclose(self) -> None:
        """Nothing of its own: the pooled client belongs to the `http` transport."""
