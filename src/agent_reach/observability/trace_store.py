"""The bounded in-process trace store behind `GET /v1/traces`.

Traces are kept in arrival order (of their first finished span); past `size`
traces the oldest is evicted, and a trace keeps at most `MAX_SPANS_PER_TRACE`
spans, so a caller that reuses one `traceparent` forever cannot grow it without
bound. Only the event loop touches it: adding a span is a dict lookup and a list
append, with no lock.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from agent_reach.clock import Clock
from agent_reach.observability.spans import Span

# Five hops of fan-out with retries stay far below this; a runaway trace stops here.
MAX_SPANS_PER_TRACE = 512


@dataclass(slots=True)
class TraceSummary:
    """One trace at a glance: its first root hop's capability and outcome, and its extent.

    `status` is the first failing root's status, else the first root's; `retries`
    counts attempts after the first of their request.
    """

    trace_id: str
    start_s: float
    duration_ms: float
    kind: str
    capability: str
    status: str
    is_error: bool
    agent_id: str | None
    request_id: str | None
    spans: int
    attempts: int
    retries: int
    node: str = ""  # the coordinator that kept it (its node id): which one served what


@dataclass(frozen=True, slots=True)
class TraceFilter:
    """What `GET /v1/traces` asks for; unset fields match everything.

    `status="error"` matches every failed trace; any other status matches exactly.
    `owner` keeps only the spans of that principal's requests, in the traces holding any.
    """

    capability: str | None = None
    status: str | None = None
    min_ms: float | None = None
    agent_id: str | None = None
    owner: str | None = None


class TraceStore:
    """trace id -> its spans, the newest `size` traces."""

    def __init__(self, size: int, clock: Clock, node_id: str = "") -> None:
        self.size = size
        self.clock = clock
        self.node_id = node_id
        self.dropped_spans = 0
        self._traces: OrderedDict[str, list[Span]] = OrderedDict()
        # trace id -> the principals its spans name: a caller's listing skips the traces
        # it has no part in at a set lookup each (measured: 10k traces in ~1 ms, not 20)
        self._principals: dict[str, tuple[str, ...]] = {}

    def __len__(self) -> int:
        return len(self._traces)

    def add(self, span: Span) -> None:
        """Append a finished span to its trace, evicting the oldest trace when full."""
        traces, trace_id = self._traces, span.trace_id
        spans = traces.get(trace_id)
        if spans is None:
            traces[trace_id] = [span]
            if len(traces) > self.size:
                self._principals.pop(traces.popitem(last=False)[0], None)
        elif len(spans) < MAX_SPANS_PER_TRACE:
            spans.append(span)
        else:
            self.dropped_spans += 1
            return
        principal, holder = span.principal, span.holder
        if principal is not None:  # most spans name none; a request's first ones its caller
            named = self._principals.get(trace_id)
            if named is None:
                self._principals[trace_id] = (principal,)
            elif principal not in named:
                self._principals[trace_id] = (*named, principal)
        if holder is not None:  # a delegated call's
            self._name(trace_id, holder)

    def _name(self, trace_id: str, principal: str) -> None:
        """`principal` among those the trace's spans name."""
        named = self._principals.get(trace_id)
        if named is None:
            self._principals[trace_id] = (principal,)
        elif principal not in named:
            self._principals[trace_id] = (*named, principal)

    def get(self, trace_id: str, owner: str | None = None) -> dict[str, Any] | None:
        """The trace's summary and every span in start order, with wall-clock times.

        Given `owner`, only the spans of that principal's requests and of the calls an
        agent of that principal delegated (from its own hop down; None when there are
        none): a trace crossing principals shows each of them its own part.
        """
        spans = self._traces.get(trace_id)
        if spans is None:
            return None
        owners = span_owners(spans)
        if owner is not None:
            spans = seen_by(spans, owners, owner)
            if not spans:
                return None
        offset_s = self._wall_offset_s()
        ordered = sorted(spans, key=_start_order)
        first = ordered[0].started
        return {
            "trace_id": trace_id,
            "node": self.node_id,
            "summary": _summarize(trace_id, spans, offset_s, self.node_id),
            "spans": [
                {
                    "span_id": s.span_id,
                    "parent_id": s.parent_id,
                    "kind": s.kind,
                    "name": s.name,
                    "start_s": s.started + offset_s,
                    "offset_ms": round((s.started - first) * 1000, 3),
                    "duration_ms": round(s.duration_ms, 3),
                    "status": s.status,
                    "is_error": s.is_error,
                    "agent_id": s.agent_id,
                    "attempt": s.attempt,
                    "note": s.note,
                    "principal": owners[s.span_id],
                    **_chain_fields(s),
                }
                for s in ordered
            ],
        }

    def recent(self, where: TraceFilter, limit: int) -> list[TraceSummary]:
        """Summaries of the newest traces that match `where`, newest first."""
        offset_s = self._wall_offset_s()
        found: list[TraceSummary] = []
        for trace_id in reversed(self._traces):
            spans = self._traces[trace_id]
            if where.owner is not None:
                # A span is owned through a span that names its owner: none named, none owned.
                if where.owner not in self._principals.get(trace_id, ()):
                    continue
                spans = seen_by(spans, span_owners(spans), where.owner)
            if where.capability is not None and all(s.name != where.capability for s in spans):
                continue
            if where.agent_id is not None and all(s.agent_id != where.agent_id for s in spans):
                continue
            summary = _summarize(trace_id, spans, offset_s, self.node_id)
            if where.min_ms is not None and summary.duration_ms < where.min_ms:
                continue
            if where.status is not None and not (
                summary.status == where.status or (where.status == "error" and summary.is_error)
            ):
                continue
            found.append(summary)
            if len(found) >= limit:
                break
        return found

    def _wall_offset_s(self) -> float:
        return self.clock.wall() - self.clock.monotonic()


def span_owners(spans: list[Span]) -> dict[str, str | None]:
    """span id -> the principal of the request it belongs to: its own, else its nearest
    ancestor's in this trace (an attempt belongs to whoever made the invoke above it)."""
    by_id = {s.span_id: s for s in spans}
    owners: dict[str, str | None] = {}
    for span in spans:
        path: list[str] = []
        current: Span | None = span
        while current is not None and current.principal is None and current.span_id not in owners:
            path.append(current.span_id)
            # a root, or a cycle of forged parent ids, ends the walk without an owner
            current = by_id.get(current.parent_id or "") if len(path) <= len(spans) else None
        owner = None
        if current is not None:
            owner = current.principal if current.principal is not None else owners[current.span_id]
        for span_id in [span.span_id, *path]:
            owners[span_id] = owner
    return owners


def seen_by(spans: list[Span], owners: dict[str, str | None], owner: str) -> list[Span]:
    """The spans `owner` may see: its own requests', and those at or under a call an
    agent of `owner` made with a delegation token it held (its hop down, not above)."""
    by_id = {s.span_id: s for s in spans}
    held: dict[str, bool] = {}

    def under_held(span: Span) -> bool:
        path: list[str] = []
        current: Span | None = span
        found = False
        while current is not None and len(path) <= len(spans):
            if current.span_id in held:
                found = held[current.span_id]
                break
            path.append(current.span_id)
            if current.holder == owner:
                found = True
                break
            current = by_id.get(current.parent_id or "")
        for span_id in path:
            held[span_id] = found
        return found

    return [s for s in spans if owners[s.span_id] == owner or under_held(s)]


def _chain_fields(span: Span) -> dict[str, Any]:
    """A delegated call's `on_behalf_of` and `via`, an attempt's reported `cost`, a route's
    `text` (and its length, `text_chars`, which says whether it was cut)."""
    fields: dict[str, Any] = {}
    if span.text is not None:
        fields["text"] = span.text
        fields["text_chars"] = span.text_chars
    if span.on_behalf_of is not None:
        fields["on_behalf_of"] = span.on_behalf_of
        fields["via"] = list(span.via or ())
    if span.cost is not None:
        fields["cost"] = span.cost
    return fields


def _start_order(span: Span) -> tuple[float, float]:
    """By start; on a tie (a coarse clock) the longer span first, as a parent encloses its child."""
    return span.started, -span.duration_ms


def _summarize(trace_id: str, spans: list[Span], offset_s: float, node: str) -> TraceSummary:
    ids = {s.span_id for s in spans}
    roots = sorted((s for s in spans if s.parent_id not in ids), key=lambda s: s.started) or spans
    root = next((s for s in roots if s.is_error), roots[0])
    start = min(s.started for s in spans)
    end = max(s.started + s.duration_ms / 1000 for s in spans)
    capability = roots[0].name or next((s.name for s in spans if s.kind == "route"), "")
    attempts = [s for s in spans if s.kind == "attempt"]
    return TraceSummary(
        trace_id=trace_id,
        start_s=start + offset_s,
        duration_ms=round((end - start) * 1000, 3),
        kind=roots[0].kind,
        capability=capability,
        status=root.status,
        is_error=root.is_error,
        agent_id=roots[0].agent_id,
        request_id=roots[0].note if roots[0].kind in ("invoke", "task") else None,
        spans=len(spans),
        attempts=len(attempts),
        retries=sum(1 for s in attempts if s.attempt > 1),
        node=node,
    )
