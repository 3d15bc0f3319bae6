"""Spans for every hop of a request: the invoke, its route decision, each attempt.

A span is one slotted record (and its span id) appended to its trace in the
in-process `TraceStore`: no lock and no OpenTelemetry object on the hot path.
When an exporter is configured (`AR_OTLP_ENDPOINT`) the same record is also
queued for it; conversion to OpenTelemetry happens on the exporter's own thread.

Span ids are the ones that travel: an attempt's span id is the parent in the
`traceparent` the agent receives, so calls the agent makes through Agent-Reach
with that header join the same trace under the attempt that caused them.
"""

from __future__ import annotations

from collections.abc import Callable

from agent_reach.clock import Clock
from agent_reach.model.keys import Chain
from agent_reach.observability.spans import TEXT_KEPT_CHARS, Span, SpanKind
from agent_reach.observability.trace_store import TraceStore
from agent_reach.observability.tracecontext import TraceContext, new_span_id

SpanExport = Callable[[Span], None]


class Tracer:
    """Times spans and keeps them; hands each finished span to `export` when one is set."""

    def __init__(self, store: TraceStore, clock: Clock, export: SpanExport | None = None) -> None:
        self.store = store
        self.clock = clock
        self.export = export

    def start(
        self,
        kind: SpanKind,
        trace: TraceContext,
        name: str,
        note: str | None = None,
        *,
        principal: str | None = None,
        chain: Chain | None = None,
    ) -> Span:
        """An open span in `trace`, child of `trace.parent_span_id`, timed from now;
        for a delegated call (`chain`), on whose behalf and through whom.

        Pass ``trace.under(span.span_id)`` to what the span calls, and `end` it once.
        """
        span = Span(
            trace.trace_id,
            new_span_id(),
            trace.parent_span_id,
            kind,
            name,
            self.clock.monotonic(),
            note=note,
            principal=principal,
        )
        if chain is not None:
            span.on_behalf_of = chain.caller.name
            span.via = tuple(link.instance for link in chain.links)
            span.holder = chain.holder.principal
        return span

    def end(self, span: Span, status: str | None = None) -> None:
        """Close `span` now with `status` (else the status already set, else `ok`) and keep it."""
        span.duration_ms = (self.clock.monotonic() - span.started) * 1000
        span.status = status or span.status or "ok"
        self.store.add(span)
        if self.export is not None:
            self.export(span)

    def record(
        self,
        kind: SpanKind,
        name: str,
        *,
        trace_id: str,
        parent_id: str | None,
        started: float,
        status: str,
        span_id: str | None = None,
        agent_id: str | None = None,
        attempt: int = 0,
        note: str | None = None,
        principal: str | None = None,
        cost: float | None = None,
        text: str | None = None,
    ) -> None:
        """Keep a span that ends now and began at monotonic `started`.

        The hook for hops that time themselves: route decisions (with the request's
        `text`, if any), attempts, context reads (``kind="context"``, `name` the context id).
        """
        span = Span(
            trace_id,
            span_id or new_span_id(),
            parent_id,
            kind,
            name,
            started,
            (self.clock.monotonic() - started) * 1000,
            status,
            agent_id,
            attempt,
            note,
            principal,
            cost=cost,
        )
        if text is not None:
            span.text, span.text_chars = text[:TEXT_KEPT_CHARS], len(text)
        self.store.add(span)  # kept, and exported when an exporter is set: as `end`
        if self.export is not None:
            self.export(span)
