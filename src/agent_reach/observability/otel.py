"""OpenTelemetry export of finished spans over OTLP/HTTP: the optional `otel` extra.

Only used when `AR_OTLP_ENDPOINT` is set. The event loop only appends the span
record to a deque; a daemon thread turns records into OpenTelemetry spans (keeping
Agent-Reach's trace and span ids, so exported traces match the `traceparent`
headers agents saw) and exports them in batches.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from agent_reach.clock import Clock
from agent_reach.errors import InvalidRequest
from agent_reach.observability.spans import Span

EXPORT_INTERVAL_S = 1.0  # spans reach the collector within about a second
MAX_BATCH = 512  # spans per OTLP request: the SDK's BatchSpanProcessor default
MAX_PENDING = 20_000  # while the collector is down the oldest spans are dropped past this
MISSING_EXTRA = (
    "AR_OTLP_ENDPOINT is set but OpenTelemetry is not installed: pip install 'agent-reach[otel]'"
)


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL: `/v1/traces` is added to a base URL, as the OTel spec says."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else f"{endpoint}/v1/traces"


class OtlpExport:
    """A `SpanExport`: call it with finished spans; `close` flushes what is pending."""

    def __init__(self, endpoint: str, clock: Clock, *, service_name: str, node_id: str) -> None:
        try:
            from opentelemetry import trace as otel_trace
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import ReadableSpan
            from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        except ImportError as exc:
            raise InvalidRequest(MISSING_EXTRA, code="missing_extra") from exc
        self._api = otel_trace
        self._readable_span = ReadableSpan
        self._resource = Resource.create(
            {"service.name": service_name, "service.instance.id": node_id}
        )
        self._scope = InstrumentationScope("agent_reach")
        self._kinds = {
            "invoke": otel_trace.SpanKind.SERVER,
            "task": otel_trace.SpanKind.CONSUMER,
            "attempt": otel_trace.SpanKind.CLIENT,
        }
        self._exporter = OTLPSpanExporter(endpoint=traces_url(endpoint))
        self._clock = clock
        self._pending: deque[Span] = deque(maxlen=MAX_PENDING)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="otlp-export", daemon=True)
        self._thread.start()

    def __call__(self, span: Span) -> None:
        self._pending.append(span)  # deque.append is atomic: no lock on the event loop

    def close(self) -> None:
        """Stop the thread, export what is pending, shut the exporter down (blocks)."""
        self._stop.set()
        self._thread.join()
        self._flush()
        self._exporter.shutdown()

    def _run(self) -> None:
        while not self._stop.wait(EXPORT_INTERVAL_S):
            self._flush()

    def _flush(self) -> None:
        while self._pending:
            batch: list[Span] = []
            while self._pending and len(batch) < MAX_BATCH:
                batch.append(self._pending.popleft())
            offset_ns = int((self._clock.wall() - self._clock.monotonic()) * 1e9)
            self._exporter.export([self._convert(span, offset_ns) for span in batch])

    def _convert(self, span: Span, offset_ns: int) -> Any:
        api = self._api
        flags = api.TraceFlags(api.TraceFlags.SAMPLED)
        trace_id = int(span.trace_id, 16)
        parent = (
            api.SpanContext(trace_id, int(span.parent_id, 16), is_remote=True, trace_flags=flags)
            if span.parent_id
            else None
        )
        start_ns = int(span.started * 1e9) + offset_ns
        attributes: dict[str, str | int | float | list[str]] = {"agent_reach.status": span.status}
        if span.agent_id:
            attributes["agent_reach.agent_id"] = span.agent_id
        if span.attempt:
            attributes["agent_reach.attempt"] = span.attempt
        if span.note:
            attributes["agent_reach.note"] = span.note
        if span.on_behalf_of is not None:  # a delegated call (docs/mesh.md)
            attributes["agent_reach.on_behalf_of"] = span.on_behalf_of
            attributes["agent_reach.via"] = list(span.via or ())
        if span.cost is not None:
            attributes["agent_reach.cost"] = span.cost
        return self._readable_span(
            name=f"{span.kind} {span.name}".strip(),
            context=api.SpanContext(trace_id, int(span.span_id, 16), False, trace_flags=flags),
            parent=parent,
            resource=self._resource,
            attributes=attributes,
            kind=self._kinds.get(span.kind, api.SpanKind.INTERNAL),
            status=api.Status(
                api.StatusCode.ERROR if span.is_error else api.StatusCode.OK,
                span.status if span.is_error else None,
            ),
            start_time=start_ns,
            end_time=start_ns + int(span.duration_ms * 1e6),
            instrumentation_scope=self._scope,
        )
