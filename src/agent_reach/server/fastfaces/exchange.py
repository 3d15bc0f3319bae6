"""The A2A and MCP faces' requests on the edge server: `answer.answer_face` answers them
without the framework, or the ASGI app does, unchanged.

A `POST` to one of `EdgeFaces.paths` (exact target, no query) with a Content-Length
body within the body limit becomes a `FaceExchange`: its body is collected as it
arrives, then `FaceRoutes.answer` either answers it (one write; an MCP call that
outlasts the SDK's 15 s turns into an event stream with pings, as the SDK's does; a
call in a session is always an event stream, as the SDK's session transport's) or
returns None before anything is invoked, and the exchange hands the request, body
included, to an `AsgiExchange` of the app. A client that leaves does not stop an answer
being made: as on `/v1/invoke`, the agent may already be called, and it runs to its end
(the SDK's modern entry cancels the handler instead).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import structlog

from agent_reach.errors import ReachError
from agent_reach.server.edge_asgi import (
    INTERNAL_ERROR,
    AsgiExchange,
    connection_header,
    http_scope,
    status_line,
)
from agent_reach.server.fastfaces import mcp as fast_mcp
from agent_reach.server.fastfaces.answer import A2A_RPC, A2A_SEND, MCP, FaceRoutes
from agent_reach.server.fastfaces.mcp import sse_event
from agent_reach.server.fastfaces.wire import EventStream, FaceAnswer

if TYPE_CHECKING:
    from agent_reach.server.app import CoordinatorApp
    from agent_reach.server.edge_connection import HttpConnection

log = structlog.get_logger("agent_reach.server")

_CHUNKED = b"transfer-encoding: chunked\r\n"


class EdgeFaces:
    """What a connection asks of the faces: which targets are theirs, and an exchange
    for one."""

    paths = frozenset({A2A_RPC, A2A_SEND, MCP})

    def __init__(self, routes: FaceRoutes) -> None:
        self.routes = routes
        self.answered = 0  # requests answered on the fast path (tests read these)
        self.handed_on = 0  # requests handed to the ASGI app

    def exchange(
        self,
        connection: HttpConnection,
        url: bytes,
        head: tuple[bytes, str, list[tuple[bytes, bytes]]],
        keep_alive: bool,
    ) -> FaceExchange:
        return FaceExchange(connection, self, url, head, keep_alive)


class FaceExchange:
    """A face request: answered on the fast path once its body is whole, or handed on."""

    __slots__ = (
        "chunks",
        "connection",
        "faces",
        "gone",
        "head",
        "http10",
        "inner",
        "keep_alive",
        "pinger",
        "pings",
        "ready",
        "started",
        "streaming",
        "url",
        "wants_continue",
    )

    def __init__(
        self,
        connection: HttpConnection,
        faces: EdgeFaces,
        url: bytes,
        head: tuple[bytes, str, list[tuple[bytes, bytes]]],  # method, HTTP version, headers
        keep_alive: bool,
    ) -> None:
        self.connection = connection
        self.faces = faces
        self.url = url
        self.head = head
        self.keep_alive = keep_alive
        self.http10 = head[1] == "1.0"
        self.chunks: list[bytes] = []
        self.inner: AsgiExchange | None = None  # the app's exchange, once handed on
        self.ready = self.started = self.wants_continue = False
        self.gone = self.streaming = False
        self.pinger: asyncio.TimerHandle | None = None  # the next ping of an event stream
        self.pings: EventStream | None = None  # the event stream committed to, if any

    @property
    def ends_on_eof(self) -> bool:
        return self.streaming if self.inner is None else self.inner.ends_on_eof

    def start(self) -> None:
        self.started = True
        self.connection.spawn(self._answer())

    def feed(self, body: bytes) -> None:
        self.chunks.append(body)  # within the limit: its Content-Length was checked

    def end(self) -> None:
        self.ready = True

    def absorb(self, error: ReachError) -> bool:
        return False  # a broken request is not the faces' to answer

    def disconnect(self) -> None:
        self.gone = True
        self._end_stream()
        if self.inner is not None:
            self.inner.disconnect()

    async def _answer(self) -> None:
        connection = self.connection
        body = b"".join(self.chunks)
        self.chunks = []
        try:
            answer = await self.faces.routes.answer(
                self.url,
                self.head[2],
                body,
                connection.peer,
                connection.tls is not None,
                connection.local,
                self._begin_stream,
            )
        except Exception:
            log.exception("request_failed", path=self.url.decode())
            if self.streaming:
                self._end_stream()
                connection.transport.close()  # part of the answer is out: only closing ends it
            else:
                connection.answer_error(ReachError(INTERNAL_ERROR))
            return
        if answer is None:
            self.faces.handed_on += 1
            self._hand_on(body)
            return
        self.faces.answered += 1
        if self.streaming or answer.stream:
            await self._stream(answer)
            return
        keep_alive = self.keep_alive and not connection.draining
        lines = b"".join(b"%s: %s\r\n" % pair for pair in answer.headers)
        connection.write(
            status_line(answer.status)
            + lines
            + connection.server.node_header
            + connection_header(keep_alive, self.http10)
            + b"\r\n"
            + answer.body
        )
        connection.finish(keep_alive)

    def _hand_on(self, body: bytes) -> None:
        """The request to the ASGI app, as if it had gone there from the start."""
        connection = self.connection
        method, version, headers = self.head
        scope = http_scope(
            method,
            self.url,
            version,
            headers,
            connection.client,
            connection.local,
            connection.server.lifespan.state,
            connection.tls,
        )
        inner = AsgiExchange(
            connection,
            connection.server.app,
            scope,
            keep_alive=self.keep_alive,
            http10=self.http10,
            expect_continue=False,
        )
        self.inner = inner
        if body:
            inner.feed(body)
        inner.end()
        if self.gone:
            inner.disconnect()
        inner.start()

    async def _stream(self, answer: FaceAnswer) -> None:
        """The answer as an event stream's content (its head first, unless a slow call
        sent it already), then the stream's end."""
        connection = self.connection
        head = b""
        if self.streaming:
            self._end_stream()
            await connection.drain()
            event = answer.body if answer.stream else sse_event(answer.body)
        else:
            head, event = self._head(answer.status, answer.headers), answer.body
        end = b"" if self.http10 else b"0\r\n\r\n"
        connection.write(head + self._chunk(event) + end)
        connection.finish(self.keep_alive and not connection.draining and not self.http10)

    def _begin_stream(self, stream: EventStream) -> None:
        """The call has run `SSE_AFTER_S`: an event stream's head and a ping now, a ping
        every `SSE_AFTER_S` after, the answer as its event (the SDK's, on either entry)."""
        self.streaming = True
        self.pings = stream
        self.connection.write(self._head(200, stream.headers))
        self._ping()

    def _head(self, status: int, headers: list[tuple[bytes, bytes]]) -> bytes:
        """An event stream's head: chunked, or read to the close on HTTP/1.0."""
        connection = self.connection
        keep_alive = self.keep_alive and not connection.draining and not self.http10
        return (
            status_line(status)
            + b"".join(b"%s: %s\r\n" % pair for pair in headers)
            + connection.server.node_header
            + (b"" if self.http10 else _CHUNKED)
            + connection_header(keep_alive, self.http10)
            + b"\r\n"
        )

    def _ping(self) -> None:
        if self.pings is not None:
            self.connection.write(self._chunk(self.pings.ping()))
        self.pinger = self.connection.loop.call_later(fast_mcp.SSE_AFTER_S, self._ping)

    def _end_stream(self) -> None:
        if self.pinger is not None:
            self.pinger.cancel()
            self.pinger = None

    def _chunk(self, data: bytes) -> bytes:
        return data if self.http10 else b"%x\r\n%s\r\n" % (len(data), data)


def faces_of(app: CoordinatorApp) -> EdgeFaces | None:
    """The fast path for a started coordinator's faces."""
    if app.faces is None:
        return None
    return EdgeFaces(FaceRoutes(app.faces, app.mcp))
