"""The delivery an agent receives: the JSON body and headers of the agent contract."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs ~4x per request
class Delivery:
    """One request as sent to an agent (docs/agent-contract.md)."""

    request_id: str
    capability: str
    payload: Any
    trace_id: str
    hop: int
    context: dict[str, Any] | None = None
    text: str | None = None  # the user's words, for a request routed by text
    params: dict[str, Any] | None = None  # what the capability's input_schema pulled out
    stream: bool = False  # the caller asked for a stream: an event stream may come back
    # {"token", "expires_at", "depth"}: on whose behalf, to hand work on (mesh/service.py)
    delegation: dict[str, Any] | None = None

    def body(self) -> bytes:
        body = {
            "request_id": self.request_id,
            "capability": self.capability,
            "payload": self.payload,
            "context": self.context,
            "trace_id": self.trace_id,
            "hop": self.hop,
        }
        if self.delegation is not None:
            body["delegation"] = self.delegation
        if self.text is not None:
            body["text"] = self.text
            if self.params is not None:
                body["params"] = self.params
        return orjson.dumps(body)

    def headers(self, traceparent: str, deadline_ms: int) -> list[tuple[str, str]]:
        """Contract headers, plus what is left of the caller's deadline."""
        return [
            ("content-type", "application/json"),
            ("x-request-id", self.request_id),
            ("traceparent", traceparent),
            ("x-reach-hop", str(self.hop)),
            ("x-reach-deadline-ms", str(deadline_ms)),
        ]

    def encoded_headers(
        self, traceparent: str, deadline_ms: int, more: bytes = b""
    ) -> bytes | None:
        """`headers` as HTTP header lines, then the lines `more`, made in one step; None
        when the request id (the one part that did not start here) is not a plain token,
        and then only the checked `headers` may carry it."""
        request_id = self.request_id
        if not (request_id.isascii() and request_id.isprintable()) or " " in request_id:
            return None
        return _ENCODED % (request_id.encode(), traceparent.encode(), self.hop, deadline_ms, more)


_ENCODED = (
    b"content-type: application/json\r\nx-request-id: %s\r\ntraceparent: %s\r\n"
    b"x-reach-hop: %d\r\nx-reach-deadline-ms: %d\r\n%s"
)
