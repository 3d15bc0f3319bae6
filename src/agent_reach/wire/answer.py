"""The HTTP answer of an invocation: status and JSON bytes, as stored for replays."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from agent_reach.errors import ReachError
from agent_reach.wire.rendering import error_body, error_headers

if TYPE_CHECKING:
    from agent_reach.wire.event_stream import EventStream


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs ~4x per request
class Answer:
    """What the caller receives; `replayed` when it came from the idempotency store."""

    status: int
    body: bytes
    replayed: bool = False
    retry_after: str | None = None  # the Retry-After header, for 429 and 503
    # An agent's event stream, relayed by the edge; `body` is empty until it has ended.
    stream: EventStream | None = None
    challenge: str | None = None  # the WWW-Authenticate header, for 401

    @classmethod
    def of(cls, status: int, document: Any) -> Answer:
        return cls(status, orjson.dumps(document))

    @classmethod
    def of_error(cls, exc: ReachError) -> Answer:
        """The error's answer on every path (`wire/rendering.py`)."""
        return cls(
            exc.status, error_body(exc), retry_after=exc.retry_after(), challenge=exc.challenge()
        )

    def error_headers(self) -> list[tuple[str, str]]:
        """`Retry-After` and `WWW-Authenticate`, when the answer is an error asking for them."""
        return error_headers(self.retry_after, self.challenge)
