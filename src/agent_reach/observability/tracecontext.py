"""W3C Trace Context: continue a caller's `traceparent`, or start a new trace."""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass

_rng = random.Random()  # our own: callers seeding `random` do not steer ids
os.register_at_fork(after_in_child=_rng.seed)  # forked workers must not repeat each other's ids

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_INVALID_TRACE = "0" * 32
_INVALID_SPAN = "0" * 16


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs ~3x, 3 per request
class TraceContext:
    """The trace a request belongs to and the span that called us (None at a root).

    Treat it as immutable: `under` makes the context of a child.
    """

    trace_id: str
    parent_span_id: str | None = None
    sampled: bool = True

    def child_traceparent(self) -> tuple[str, str]:
        """A new span id under this trace and the `traceparent` header that carries it."""
        span_id = new_span_id()
        return span_id, f"00-{self.trace_id}-{span_id}-{'01' if self.sampled else '00'}"

    def under(self, span_id: str) -> TraceContext:
        """The same trace as seen by what span `span_id` calls: that span is their parent."""
        return TraceContext(self.trace_id, span_id, self.sampled)


def new_span_id() -> str:
    """64 random bits as 16 hex digits; never all zeros (the W3C invalid span id)."""
    # random, not os.urandom: a span id is not a secret and a syscall per hop costs ~0.5 µs.
    return f"{_rng.getrandbits(64) or 1:016x}"


def new_trace() -> TraceContext:
    """A fresh trace id: 128 random bits (not a secret, so no syscall), never all zeros."""
    return TraceContext(f"{_rng.getrandbits(128) or 1:032x}")


def continue_trace(traceparent: str | None) -> TraceContext:
    """The caller's trace when its header is valid; a fresh one otherwise (never an error)."""
    if traceparent:
        m = _TRACEPARENT.match(traceparent.strip().lower())
        if m and m[1] != _INVALID_TRACE and m[2] != _INVALID_SPAN:
            return TraceContext(m[1], m[2], bool(int(m[3], 16) & 1))
    return new_trace()
