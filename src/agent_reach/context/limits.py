"""How big a context may grow; a write that would pass a limit is refused whole.

Limits are checked before the store is called, or by the store inside the same atomic
step (segments), so a refused write never leaves part of itself behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_reach.backends.protocols import SegmentPolicy
from agent_reach.config import Settings
from agent_reach.errors import PayloadTooLarge, ValidationFailed


@dataclass(frozen=True, slots=True)
class ContextLimits:
    """Document size and field count, and how appended lists are segmented."""

    max_bytes: int
    max_fields: int
    segments: SegmentPolicy

    @classmethod
    def from_settings(cls, settings: Settings) -> ContextLimits:
        return cls(
            max_bytes=settings.context_max_bytes,
            max_fields=settings.context_max_fields,
            segments=SegmentPolicy(
                items=settings.context_segment_items,
                max_bytes=settings.context_segment_bytes,
                max_segments=settings.context_max_segments,
            ),
        )

    def check_document(self, encoded: bytes, document: dict[str, Any]) -> None:
        """413 `context_too_large` or 422 `too_many_fields` for a document over a limit."""
        if len(encoded) > self.max_bytes:
            raise PayloadTooLarge(
                f"the context document would take {len(encoded)} bytes; "
                f"the limit is {self.max_bytes}",
                code="context_too_large",
                limit=self.max_bytes,
            )
        fields = count_fields(document)
        if fields > self.max_fields:
            raise ValidationFailed(
                f"the context document would have {fields} fields; the limit is {self.max_fields}",
                code="too_many_fields",
                limit=self.max_fields,
            )

    def check_item(self, encoded: bytes) -> None:
        """413 `context_too_large` for a list item that does not fit in one segment."""
        if len(encoded) > self.segments.max_bytes:
            raise PayloadTooLarge(
                f"a list item of {len(encoded)} bytes does not fit in a segment "
                f"of {self.segments.max_bytes} bytes",
                code="context_too_large",
                limit=self.segments.max_bytes,
            )

    def too_many_segments(self) -> PayloadTooLarge:
        """413 `too_many_segments`: the append would keep too many live segments."""
        return PayloadTooLarge(
            f"the context would hold more than {self.segments.max_segments} live list "
            "segments; start a new context, or let old items expire",
            code="too_many_segments",
            limit=self.segments.max_segments,
        )


def count_fields(value: Any) -> int:
    """Object keys at every depth, arrays searched too (iterative: no recursion limit)."""
    count, pending = 0, [value]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            count += len(node)
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return count
