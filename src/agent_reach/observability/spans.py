"""A span: one hop of a request (the invoke, its route decision, an attempt, a context read)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SpanKind = Literal["invoke", "task", "route", "attempt", "context", "workflow", "step"]

# The user's words a route span keeps (the rest is counted, not held): 10,000 traces of
# 4,000-character texts would hold 80 MB; at 500 the trace store holds at most a tenth of it.
TEXT_KEPT_CHARS = 500

# Outcomes that are not failures: the request was answered, parked, or handed on.
SUCCESS_STATUSES = frozenset(
    {"ok", "fallback", "degraded", "queued", "suspended", "replayed", "partial", "parked"}
)


@dataclass(slots=True)
class Span:
    """One hop: what ran (`kind`, `name`: a capability or context id), who, when, how it ended.

    `started` is the process's monotonic clock in seconds (views turn it into wall
    time); `attempt` is the attempt number for `attempt` spans, else 0; `note` says
    why the hop happened or how: the request id of an invoke, the routing rule, or
    how an attempt after the first was chosen (`resend`, `next_instance`, `generic`).
    `principal` is set on the spans a request starts with (invoke, task, route); the
    spans under them belong to the same principal.
    """

    trace_id: str
    span_id: str
    parent_id: str | None
    kind: SpanKind
    name: str
    started: float
    duration_ms: float = 0.0
    status: str = ""
    agent_id: str | None = None
    attempt: int = 0
    note: str | None = None
    principal: str | None = None  # who made the request; None: the parent span's
    # A delegated call (docs/mesh.md): its invoke span names the original caller, the
    # chain's agent instances (oldest first) and the principal of the agent that made
    # the call; an attempt span, what its agent reported the answer cost.
    on_behalf_of: str | None = None
    via: tuple[str, ...] | None = None
    holder: str | None = None
    cost: float | None = None
    # A route span of a request that carried text: its first TEXT_KEPT_CHARS characters,
    # and how many it had. Kept in memory only: never exported (observability/otel.py).
    text: str | None = None
    text_chars: int = 0

    @property
    def is_error(self) -> bool:
        return self.status not in SUCCESS_STATUSES
