"""What the faces' fast path reads of a request's head and writes back: one pass over
the headers, and whole answers as the ASGI app would send them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agent_reach.identity.certificates import PeerCertificate

Headers = list[tuple[bytes, bytes]]
RawHeaders = list[tuple[bytes, bytes]]
JSON = b"application/json"
ROUTING = (b"mcp-protocol-version", b"mcp-method", b"mcp-name")
_SESSION = b"mcp-session-id"


@dataclass(frozen=True, slots=True)
class FaceAnswer:
    """A whole answer: status, headers as the ASGI app would send them (the edge adds
    `x-reach-node` and framing), body. `stream`: the body is an event stream's content,
    sent as the app sends a streamed body (chunked, or to the close on HTTP/1.0)."""

    status: int
    headers: RawHeaders
    body: bytes
    stream: bool = False


@dataclass(frozen=True, slots=True)
class EventStream:
    """The head of an event stream an answer commits to before it is made, and the
    comment that keeps it alive (made anew for each ping)."""

    headers: RawHeaders
    ping: Callable[[], bytes]


# Called when an MCP call has run its window: the edge commits to this event stream
# (`exchange`), pings it, and sends the answer's event once it is made.
OnSlow = Callable[[EventStream], None]


@dataclass(slots=True)
class Request:
    """What the faces read of a request's head: the first value of each header (as
    Starlette's `headers.get`), the last Host and Origin."""

    headers: Headers
    peer: PeerCertificate | None
    tls: bool
    local: tuple[str, int]
    host: bytes | None = None
    hosts: int = 0
    origin: bytes | None = None
    authorization: str | None = None
    authorizations: int = 0
    content_type: bytes | None = None
    accept: bytes | None = None
    traceparent: str | None = None
    a2a_version: str | None = None
    mcp: dict[bytes, str] | None = None  # routing headers; None when one is repeated
    session_id: str | None = None  # the first Mcp-Session-Id
    session_ids: int = 0
    mcp_other: bool = False  # any other Mcp-* header (Mcp-Param-*)

    def scope(self) -> dict[str, Any]:
        """The little of an ASGI scope `faces/mcp_auth` reads."""
        return {
            "scheme": "https" if self.tls else "http",
            "headers": self.headers,
            "server": self.local,
        }


def read_head(
    headers: Headers, peer: PeerCertificate | None, tls: bool, local: tuple[str, int]
) -> Request:
    """One pass over the head."""
    request = Request(headers, peer, tls, local)
    mcp: dict[bytes, str] | None = {}
    for name, value in headers:
        if name == b"authorization":
            request.authorizations += 1
            if request.authorization is None:
                request.authorization = value.decode("latin-1")
        elif name == b"host":  # the last, as `server/app._check_origin` reads them
            request.host = value
            request.hosts += 1
        elif name == b"origin":
            request.origin = value
        elif name == b"content-type":
            request.content_type = request.content_type or value
        elif name == b"accept":
            request.accept = value if request.accept is None else request.accept
        elif name == b"traceparent":
            request.traceparent = request.traceparent or value.decode("latin-1")
        elif name == b"a2a-version":
            if request.a2a_version is None:
                request.a2a_version = value.decode("latin-1")
        elif name.startswith(b"mcp-"):
            if name in ROUTING:
                if mcp is not None and name in mcp:
                    mcp = None
                elif mcp is not None:
                    mcp[name] = value.decode("latin-1")
            elif name == _SESSION:
                request.session_ids += 1
                if request.session_id is None:
                    request.session_id = value.decode("latin-1")
            else:
                request.mcp_other = True
    request.mcp = mcp
    return request


def json_answer(status: int, body: bytes) -> FaceAnswer:
    return FaceAnswer(status, json_headers(body), body)


def json_headers(body: bytes) -> RawHeaders:
    """Starlette's for a JSON `Response`: its length, then its type."""
    return [(b"content-length", b"%d" % len(body)), (b"content-type", JSON)]


def given(body: bytes) -> Callable[[], Awaitable[bytes]]:
    """A body reader that gives `body`."""

    async def read() -> bytes:
        return body

    return read
