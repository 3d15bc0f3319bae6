"""The handshake-era MCP sessions `/mcp` has opened and not yet ended, kept by the face.

A session is recorded when its `initialize` succeeds (by `McpFace`: the negotiated
protocol version, the principal that opened it, its server side for notifications) and
forgotten when it ends: a `DELETE`, the SDK answering its id 404, idle expiry, shutdown.
The face expires idle sessions itself (a `DELETE` through the SDK's own entry), because
calls answered on the edge server's fast path (`server/fastfaces/mcp_session.py`) never reach
the SDK's transport, whose idle timer would otherwise end a session in use.

A session is bound to the principal that opened it: its id sent with another
principal's credentials is answered 404, as an unknown session is (`foreign`), so a
leaked session id lets no one act in it or learn that it exists.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import mcp_types as types
from mcp.server.session import ServerSession
from mcp.server.streamable_http_manager import DEFAULT_SESSION_IDLE_TIMEOUT
from starlette.responses import Response

from agent_reach.model.keys import Principal


@dataclass(slots=True)
class LiveSession:
    """One open session: what a call inside it is answered by."""

    version: str  # negotiated in `initialize`
    principal: Principal  # who opened it: only the same credentials use it on the fast path
    server_side: ServerSession  # its standalone channel carries `tools/list_changed`
    used: float = field(default_factory=time.monotonic)  # the last request's end
    in_flight: int = 0  # requests being answered: a session in use is never idle


@dataclass(slots=True)
class Opening:
    """What an `initialize` request's handling learns, carried in its ASGI scope."""

    principal: Principal
    version: str | None = None
    server_side: ServerSession | None = None


class LiveSessions:
    """Open handshake-era sessions by `Mcp-Session-Id`."""

    def __init__(self, idle_s: float = DEFAULT_SESSION_IDLE_TIMEOUT) -> None:
        self.idle_s = idle_s  # the SDK's default: 30 min with no request in flight
        self.live: dict[str, LiveSession] = {}

    def get(self, session_id: str) -> LiveSession | None:
        return self.live.get(session_id)

    def opened(self, session_id: str, opening: Opening) -> None:
        """Record a session whose `initialize` succeeded."""
        if opening.version is not None and opening.server_side is not None:
            self.live[session_id] = LiveSession(
                opening.version, opening.principal, opening.server_side
            )

    def foreign(self, session_id: str, principal: Principal) -> bool:
        """Whether `session_id` is a live session another principal opened."""
        live = self.live.get(session_id)
        return live is not None and live.principal.name != principal.name

    def ended(self, session_id: str) -> None:
        self.live.pop(session_id, None)

    @contextlib.contextmanager
    def using(self, session_id: str) -> Iterator[None]:
        """A request of the session is being answered: it holds the session open."""
        session = self.live.get(session_id)
        if session is None:
            yield
            return
        session.in_flight += 1
        try:
            yield
        finally:
            session.in_flight -= 1
            session.used = time.monotonic()

    def idle(self) -> list[str]:
        """The sessions with no request in flight for `idle_s`."""
        since = time.monotonic() - self.idle_s
        return [i for i, s in self.live.items() if not s.in_flight and s.used <= since]

    def clear(self) -> None:
        self.live.clear()


def session_not_found() -> Response:
    """The SDK's own answer to an unknown session id: 404, a JSON-RPC error without id."""
    error = types.JSONRPCError(
        jsonrpc="2.0",
        id=None,
        error=types.ErrorData(code=types.INVALID_REQUEST, message="Session not found"),
    )
    return Response(
        error.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=404,
        media_type="application/json",
    )
