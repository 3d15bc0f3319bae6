"""One MCP session with one server instance: initialize, requests, and its listening stream.

The session lives as long as the instance is registered here. Its id (`Mcp-Session-Id`)
goes on every request; a 404 to a request carrying it means the server has forgotten
the session (it restarted, or expired it) and did not process the request (MCP
2025-11-25, "Session Management"), so the session is initialized again and that one
request is sent once more. After initialize a GET stream stays open for what the
server says unasked (`notifications/tools/list_changed`); a server without one (405)
is simply not listened to.

Failures say whether the server may have acted, as the `http` transport's do: nothing
sent (connect refused, reset before the write) is `AgentUnreachable`; once the request
was written, a lost connection or no answer in time is `outcome_unknown`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable
from typing import Any

import structlog
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from agent_reach.errors import AgentFailed, AgentUnreachable
from agent_reach.federation import wire
from agent_reach.wire import pool
from agent_reach.wire.failures import Peer, delivery_failure
from agent_reach.wire.pool_stream import open_stream
from agent_reach.wire.sse import SseFramer

log = structlog.get_logger("agent_reach.federation")

CLIENT_INFO = {"name": "agent-reach", "version": "1"}
# A listening stream is re-opened this often even when the server keeps it: a stream
# the server half-forgot (a proxy's idle cut) heals within this time.
LISTEN_S = 60.0
LISTEN_RETRY_S = 1.0  # after a failed listen, before the next try
SERVER = Peer("the MCP server")
NO_SESSION = 404  # "the session is gone": the request was not processed
GONE = "gone"  # told when the session ends because its instance is no longer registered
LISTENING = "listening"  # told when a stream opens: what the server said before it is lost

ServerSaid = Callable[[str], None]  # told each notification method the server sent


class McpSession:
    """The session of one instance on this coordinator (see the module docstring)."""

    def __init__(
        self,
        client: pool.HttpPool,
        endpoint: str,
        server_said: ServerSaid,
        is_wanted: Callable[[], bool] = lambda: True,
    ) -> None:
        self.client = client
        self.endpoint = endpoint
        self.server_said = server_said
        self.is_wanted = is_wanted  # False once its instance is gone: stop listening
        self.session_id: str | None = None
        self.version = LATEST_HANDSHAKE_VERSION
        self.server: dict[str, Any] = {}  # the initialize result: serverInfo, instructions
        self.initializations = 0
        self._ready = False
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._listener: asyncio.Task[None] | None = None
        self._closed = False

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        deadline: float,
        headers: list[tuple[str, str]] | None = None,
    ) -> dict[str, Any]:
        """The result of one request; `AgentFailed` (see the module docstring) else."""
        await self.ensure(deadline)
        sent_with = self.session_id
        try:
            return await self._post(method, params, deadline, headers or [])
        except _SessionGone:
            await self._forget(sent_with)
            await self.ensure(deadline)
            try:
                return await self._post(method, params, deadline, headers or [])
            except _SessionGone:
                raise AgentFailed(
                    "the MCP server refused its new session (404)", http_status=NO_SESSION
                ) from None

    async def ensure(self, deadline: float) -> None:
        """Initialize the session unless it is ready (one initialize at a time)."""
        if self._ready:
            return
        async with self._lock:
            if self._ready:
                return
            self.session_id = None
            try:
                result = await self._post(
                    "initialize",
                    {
                        "protocolVersion": LATEST_HANDSHAKE_VERSION,
                        "capabilities": {},
                        "clientInfo": CLIENT_INFO,
                    },
                    deadline,
                    [],
                    initializing=True,
                )
            except AgentFailed as exc:
                # Nothing but the handshake reached the server: the request itself is unsent.
                raise AgentUnreachable(
                    f"the MCP session could not be initialized: {exc.message}",
                    connect_timeout=exc.connect_timeout,
                ) from None
            version = result.get("protocolVersion")
            if version not in HANDSHAKE_PROTOCOL_VERSIONS:
                raise AgentUnreachable(f"the MCP server speaks protocol {version!r}, not one we do")
            self.version, self.server = str(version), result
            await self._notify("notifications/initialized", deadline)
            self._ready = True
            self.initializations += 1
            self._listen()
        if self.initializations > 1:
            self.server_said("initialized")  # a new session: its tool list may be new too

    async def close(self) -> None:
        self._closed = True
        self._ready = False
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None

    async def _forget(self, session_id: str | None) -> None:
        async with self._lock:
            if self.session_id == session_id:  # not already renewed by another request
                self._ready = False
                log.info("mcp_session_lost", endpoint=self.endpoint)

    def _headers(self, extra: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return [
            ("content-type", "application/json"),
            ("accept", wire.ACCEPT),
            *extra,
            *self._session_headers(),
        ]

    def _session_headers(self) -> list[tuple[str, str]]:
        headers = []
        if self.session_id is not None:
            headers.append((wire.SESSION_HEADER, self.session_id))
        if self._ready:
            headers.append((wire.VERSION_HEADER, self.version))
        return headers

    async def _post(
        self,
        method: str,
        params: dict[str, Any] | None,
        deadline: float,
        extra: list[tuple[str, str]],
        *,
        initializing: bool = False,
    ) -> dict[str, Any]:
        message_id = next(self._ids)
        timeout_s = max(0.001, deadline - asyncio.get_running_loop().time())
        try:
            response = await self.client.request(
                "POST",
                self.endpoint,
                headers=self._headers(extra),
                body=wire.request(message_id, method, params),
                timeout_s=timeout_s,
            )
        except pool.PoolError as exc:
            raise delivery_failure(exc, timeout_s, SERVER, _unreadable_answer) from None
        if response.status == NO_SESSION and self.session_id is not None and not initializing:
            raise _SessionGone
        if not 200 <= response.status < 300:
            # 429 and 503 say it did not take the request; any other answer may follow work
            # (a 5xx: it may have acted; a 4xx: the request's own fault). Final either way.
            failure = AgentFailed(
                f"the MCP server answered HTTP {response.status}",
                http_status=response.status,
                agent_answer=response.body[:512].decode("utf-8", "replace"),
                retryable=response.status in (429, 503),
            )
            if response.status >= 500 and not failure.retryable:
                failure.outcome_unknown = True
            raise failure
        if initializing:
            header = _header(response.headers, wire.SESSION_HEADER.encode())
            self.session_id = header.decode("latin-1") if header is not None else None
        try:
            answer = wire.read_answer(
                _header(response.headers, b"content-type"), response.body, message_id
            )
        except wire.BadMessage as exc:
            raise _unreadable(str(exc)) from None
        for other in answer.others:
            self._heard(other)
        if answer.response is None:
            raise _unreadable("the answer carries no response to the request")
        error = answer.response.get("error")
        if error is not None:
            raise _rpc_error(error)
        result = answer.response.get("result")
        if not isinstance(result, dict):
            raise _unreadable("the response's result is not an object")
        return result

    async def _notify(self, method: str, deadline: float) -> None:
        timeout_s = max(0.001, deadline - asyncio.get_running_loop().time())
        try:
            await self.client.request(
                "POST",
                self.endpoint,
                headers=self._headers([]),
                body=wire.notification(method),
                timeout_s=timeout_s,
            )
        except pool.PoolError as exc:
            raise AgentUnreachable(f"the MCP session could not be initialized: {exc}") from None

    def _heard(self, message: dict[str, Any]) -> None:
        """A message the server sent unasked: notifications are told, requests answered."""
        method = message.get("method")
        if not isinstance(method, str):
            return
        if "id" not in message:
            self.server_said(method)
            return
        answer = (
            wire.reply(message["id"], {})
            if method == "ping"
            else wire.reply(message["id"], None, f"{method} is not served by this client")
        )
        asyncio.get_running_loop().create_task(self._send_reply(answer))

    async def _send_reply(self, body: bytes) -> None:
        with contextlib.suppress(pool.PoolError):
            await self.client.request(
                "POST", self.endpoint, headers=self._headers([]), body=body, timeout_s=5.0
            )

    def _listen(self) -> None:
        if self._listener is None or self._listener.done():
            self._listener = asyncio.get_running_loop().create_task(
                self._listen_forever(), name=f"mcp-listen-{self.endpoint}"
            )

    async def _listen_forever(self) -> None:
        """Keep the GET stream open while the session is; tell what comes on it. The
        first stream opens while the instance is still being registered; before each
        later one, an instance no longer registered ends the session."""
        first = True
        while not self._closed:
            if not first and not self.is_wanted():
                self._closed, self._ready = True, False
                self.server_said(GONE)
                return
            first = False
            if not self._ready:
                await asyncio.sleep(LISTEN_RETRY_S)
                continue
            session_id = self.session_id
            try:
                stream = await open_stream(
                    self.client,
                    "GET",
                    self.endpoint,
                    headers=[("accept", "text/event-stream"), *self._session_headers()],
                    timeout_s=LISTEN_S,
                )
            except pool.PoolError:
                await asyncio.sleep(LISTEN_RETRY_S)
                continue
            if stream.status == 405:  # the server offers no stream: nothing to listen to
                stream.close()
                return
            if stream.status == NO_SESSION:
                stream.close()
                await self._forget(session_id)
                continue
            if not 200 <= stream.status < 300:
                stream.close()
                await asyncio.sleep(LISTEN_RETRY_S)
                continue
            if self.is_wanted():  # a change said while no stream was open went unheard
                self.server_said(LISTENING)
            await self._read_stream(stream)

    async def _read_stream(self, stream: Any) -> None:
        framer = SseFramer()
        try:
            while (chunk := await stream.next_chunk()) is not None:
                for message in wire.events_of(framer, chunk):
                    self._heard(message)
        except pool.PoolError:
            pass  # a timed-out or cut stream: opened again by the loop
        finally:
            stream.close()


class _SessionGone(Exception):
    """404 to a request carrying the session id: the server no longer knows the session."""


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    for key, value in headers:
        if key == name:
            return value
    return None


def _unreadable_answer(exc: pool.ResponseTooLarge | pool.InvalidResponse) -> AgentFailed:
    return _unreadable(str(exc))


def _unreadable(message: str) -> AgentFailed:
    return AgentFailed(  # it acted and answered: final
        f"the MCP server's answer cannot be read: {message}",
        code="agent_bad_answer",
        retryable=False,
    )


def _rpc_error(error: Any) -> AgentFailed:
    """A JSON-RPC error: the server read the request and refused it; final."""
    detail = error if isinstance(error, dict) else {"message": str(error)}
    return AgentFailed(
        f"the MCP server refused the request: {detail.get('message', '')}",
        code="mcp_error",
        retryable=False,
        agent_answer=detail,
    )
