"""One HTTP/1.1 connection of the edge server: requests parsed by httptools as they
arrive, answered in order, one at a time.

`POST /v1/invoke` (exact path, any query) is collected here and answered with
`fastpath.answer_invoke` in one `transport.write`; the A2A and MCP faces' posts are
collected by an exchange of `fastfaces`, answered on their fast path or handed to the
app; every other request becomes an `AsgiExchange`. A request that cannot be parsed, or
outgrows what any allowed head needs, is refused with its JSON error after the answers
already due, and the connection closes. Reading pauses while a pipelined request waits
its turn, while an app leaves a large body unread, and while the client does not read
its answers.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Coroutine
from typing import Any, Protocol

import httptools
import structlog

from agent_reach.errors import HeadersTooLarge, InvalidRequest, ReachError, VersionNotSupported
from agent_reach.identity.certificates import PeerCertificate, tls_extension
from agent_reach.invoke.service import InvokeService
from agent_reach.server.edge_asgi import (
    CONTINUE,
    INTERNAL_ERROR,
    STATUS_LINES,
    ASGIApp,
    AsgiExchange,
    Lifespan,
    connection_header,
    http_scope,
    status_line,
)
from agent_reach.server.edge_chunks import ChunkLines
from agent_reach.server.edge_stream import abort_stream, relay_answer
from agent_reach.server.fastpath import answer_invoke, body_too_large
from agent_reach.server.limits import check_headers, check_target
from agent_reach.wire.answer import Answer
from agent_reach.wire.event_stream import EventStream
from agent_reach.wire.rendering import error_body, error_headers

log = structlog.get_logger("agent_reach.server")

# What a head may grow by after its first read before httptools hands its headers
# over (it joins the pieces of a header itself): twice nginx's 4 x 8 KiB header
# buffers. `check_headers` holds the exact limits; this bounds the memory of a header
# that never ends to one read (uvloop reads up to 256,000 bytes) and this much.
MAX_HEAD_BYTES = 64 * 1024
# A refused request's body may still be arriving: after the answer the connection is
# half-closed and read (and discarded) this long and this much at most, so the client
# reads the answer instead of a reset (RFC 9112 §9.6; nginx's lingering close, 30 s).
LINGER_S = 10.0
LINGER_BYTES = 64 * 1024 * 1024
_VERSIONS = frozenset({"1.0", "1.1"})
# The request headers that frame it or ask for something (besides Host, counted first).
_FRAMING = frozenset({b"content-length", b"expect", b"transfer-encoding"})
_INVOKE = b"/v1/invoke"
_INVOKE_QUERY = b"/v1/invoke?"


class Exchange(Protocol):
    """One request on a connection, from its head to the end of its response."""

    ready: bool  # may start: the invoke path waits for the whole body
    started: bool
    keep_alive: bool
    wants_continue: bool  # owed a 100 Continue once it is first in line

    def start(self) -> None: ...

    def feed(self, body: bytes) -> None: ...

    def end(self) -> None: ...

    def absorb(self, error: ReachError) -> bool:
        """Take `error`, raised while the request arrived, as this request's answer."""
        ...

    def disconnect(self) -> None: ...


class Faces(Protocol):
    """The A2A and MCP faces' fast path (`fastfaces.exchange.EdgeFaces`)."""

    paths: frozenset[bytes]

    def exchange(
        self,
        connection: HttpConnection,
        url: bytes,
        head: tuple[bytes, str, list[tuple[bytes, bytes]]],
        keep_alive: bool,
    ) -> Exchange: ...


class Host(Protocol):
    """What a connection needs from the server that accepted it (`EdgeServer`)."""

    app: ASGIApp
    invoke: InvokeService | None  # the coordinator's invoke service, once it has started
    faces: Faces | None  # the faces' fast path, once the coordinator has started
    body_limit: int
    node_header: bytes  # ``x-reach-node: <id>`` and CRLF on every invoke answer
    draining: bool
    connections: set[HttpConnection]
    tasks: set[asyncio.Task[None]]
    lifespan: Lifespan

    @property
    def timeouts(self) -> Timeouts: ...

    def forget(self, connection: HttpConnection) -> None: ...

    def task_done(self, task: asyncio.Task[None]) -> None: ...


class Timeouts(Protocol):
    """How long a connection may stay idle, and how long a request head may take."""

    @property
    def keep_alive_s(self) -> float: ...

    @property
    def header_timeout_s(self) -> float: ...


class HttpConnection(asyncio.Protocol):
    """One client connection: requests parsed as they arrive, answered in order."""

    transport: asyncio.Transport  # set by connection_made, before any data

    def __init__(self, server: Host, loop: asyncio.AbstractEventLoop) -> None:
        self.server = server
        self.loop = loop
        self.parser = _request_parser(self)
        self.queue: deque[Exchange] = deque()  # arrival order; the first is being answered
        self.current: Exchange | None = None  # whose body is arriving
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.declared = 0  # Content-Length
        self.expect_continue = False
        self.hosts = 0  # Host headers of the request arriving
        self.says_chunked = False  # ... and whether a Transfer-Encoding of it names chunked
        self.refused = False  # a request was refused before it was read whole
        self.linger_left = 0  # bytes still to discard once lingering; lingering when > 0
        self.linger_timer: asyncio.TimerHandle | None = None
        self.upgrade_body = False  # an ignored Upgrade: its body comes after the "upgrade"
        self.priming = False  # a fresh parser is reading the synthetic head of such a body
        self.in_head = False
        self.in_message = False
        self.head_bytes = 0  # of a head that spans reads, after its first read
        self.head_tail = b""  # the last bytes of a head that spans reads: its end may straddle
        self.body_left = 0  # of a Content-Length body
        self.chunked_head = False  # the head just parsed announced a chunked body
        self.chunk_lines: ChunkLines | None = None  # follows a chunked body from its first byte
        self.active_at = self.head_started = loop.time()
        self.reading_done = False  # EOF, upgrade or a refused request: no more requests
        self.read_paused = self.write_paused = self.body_held = False
        self.draining = False
        self.drained: asyncio.Future[None] | None = None
        self.client: tuple[str, int] = ("", 0)
        self.local: tuple[str, int] = ("", 0)
        self.tls: dict[str, Any] | None = None  # the scope's TLS extension, on HTTPS
        self.peer: PeerCertificate | None = None  # the verified client certificate

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.client = transport.get_extra_info("peername")[:2]
        self.local = transport.get_extra_info("sockname")[:2]
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None:  # the handshake is done: read the certificate once
            self.tls = tls_extension(ssl_object)
            self.peer = self.tls["peer"]
        self.server.connections.add(self)
        if self.server.draining:
            transport.close()  # accepted as the listener closed

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.forget(self)
        if self.linger_timer is not None:
            self.linger_timer.cancel()
        for exchange in self.queue:
            exchange.disconnect()
        self.queue.clear()
        self.current = None
        self._wake_writer()

    def eof_received(self) -> bool:
        """Half-closed by the client: answer what has arrived, then close (an event
        stream being answered ends at once: its client has gone, `edge_stream`)."""
        if self.linger_left:
            return False  # the refused request has ended: close now
        if self.queue and getattr(self.queue[0], "ends_on_eof", False):
            return False
        self._end_reading()
        return bool(self.queue) and not self.in_message

    def pause_writing(self) -> None:
        self.write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        self._update_reading()
        self._wake_writer()

    def data_received(self, data: bytes) -> None:
        if self.linger_left:
            self.linger_left -= min(len(data), self.linger_left)
            if not self.linger_left:
                self.transport.close()
            return
        if self.reading_done:
            return
        self.active_at = self.loop.time()
        if self.in_head:
            self.head_bytes += len(data)
            if self.head_bytes > MAX_HEAD_BYTES:
                try:  # past MAX_HEAD_BYTES the exact limits are passed too
                    check_headers(len(self.headers), self.head_bytes)
                except HeadersTooLarge as exc:
                    self._refuse(exc)
                return
        if (
            self.chunk_lines is None
            and not self.in_head
            and b"hunked" not in data
            and b"HUNKED" not in data
        ):
            self._parse(data, b"")  # no chunked body begins here: llhttp reads it all at once
            if self.in_head:
                self.head_tail = data[-3:]  # the head's end may straddle this read and the next
            return
        # Heads are fed up to their end, so a chunked body is followed from its first byte.
        while data and not self.reading_done:
            if self.chunk_lines is not None:
                piece, rest = self.chunk_lines.feed(data)
                data, at_end = rest or b"", False
            elif self.in_message and not self.in_head and self.body_left > 0:
                piece, data, at_end = data[: self.body_left], data[self.body_left :], False
            else:
                piece, data, at_end = self._head_piece(data)
                if at_end:  # the head must end with the piece's last byte, not before it
                    self.chunked_head = False
                    if not self._parse(piece[:-1], piece[-1:] + data):
                        return
                    piece, at_end = piece[-1:], self.in_head and not self.chunked_head
            self.chunked_head = False
            if not self._parse(piece, data):
                return
            if self.chunked_head and at_end:  # the body begins right after this piece
                self.chunk_lines = ChunkLines()

    def _head_piece(self, data: bytes) -> tuple[bytes, bytes, bool]:
        """`data` up to the end of the head arriving (all of it while the head goes on),
        what follows, and whether the piece ends where a head can end."""
        tail = self.head_tail
        end = (tail + data).find(b"\r\n\r\n") if tail else data.find(b"\r\n\r\n")
        if end < 0:
            self.head_tail = (tail + data)[-3:]
            return data, b"", False
        self.head_tail = b""
        end += 4 - len(tail)
        return data[:end], data[end:], True

    def _parse(self, data: bytes, rest: bytes) -> bool:
        """Feed llhttp; False once reading stopped (`rest`, what follows `data`, is then
        read on after an ignored upgrade, or never)."""
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            if self.upgrade_body:  # RFC 9110 §7.8: ignore the upgrade, read the body
                self._read_on_after_upgrade(data[upgrade.args[0] :] + rest)
                return False
            self._end_reading()  # no protocol switch: answer the request, then close
            if self.queue:
                self.queue[-1].keep_alive = False
            return False
        except httptools.HttpParserCallbackError as exc:
            if not isinstance(exc.__context__, ReachError):
                raise  # a bug in a callback: asyncio logs it and closes the connection
            self._refuse(exc.__context__)
            return False
        except httptools.HttpParserError:
            self._refuse(InvalidRequest("the request is not valid HTTP/1.1", code="bad_request"))
            return False
        return True

    # httptools callbacks

    def on_message_begin(self) -> None:
        if self.priming:
            return
        self.in_head = self.in_message = True
        self.head_bytes = 0
        self.head_started = self.active_at
        self.url = b""
        self.headers = []
        self.declared = 0
        self.expect_continue = False
        self.hosts = 0
        self.says_chunked = False
        self.upgrade_body = False

    def on_url(self, url: bytes) -> None:
        if self.priming:
            return
        self.url += url
        check_target(len(self.url))

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.priming:
            return
        name = name.lower()
        self.headers.append((name, value))
        if name == b"host":
            self.hosts += 1
        elif name in _FRAMING:  # one set lookup for the other headers of a request
            if name == b"content-length":
                self.declared = int(value)  # llhttp accepts digits only, and one of them
            elif name == b"expect":
                self.expect_continue = value.lower() == b"100-continue"
            elif b"chunked" in value.lower():  # transfer-encoding
                self.says_chunked = True

    def on_headers_complete(self) -> None:
        if self.priming:
            return
        self.in_head = False
        parser = self.parser
        server = self.server
        keep_alive = parser.should_keep_alive()
        http_version = parser.get_http_version()
        method = parser.get_method()
        url = self.url
        if http_version != "1.1" or self.hosts != 1:  # else valid: no call for it
            _check_request_line(http_version, self.hosts)
        if http_version == "1.0":
            self.expect_continue = False  # RFC 9110 §10.1.1: never 100 to an HTTP/1.0 client
        self.head_tail = b""
        self.body_left = self.declared
        self.chunked_head = self.says_chunked
        if parser.should_upgrade():
            self.upgrade_body = self.declared > 0 or self.chunked_head
        exchange: Exchange
        if (
            server.invoke is not None
            and method == b"POST"
            and (url == _INVOKE or url.startswith(_INVOKE_QUERY))
        ):
            exchange = _Invoke(
                self, server.invoke, self.headers, keep_alive, http_version == "1.0", self.peer
            )
            self.current = exchange
            if self.declared > server.body_limit:
                self._enqueue(exchange)
                raise body_too_large(server.body_limit)
            exchange.wants_continue = self.expect_continue
            self._enqueue(exchange)
        elif (
            server.faces is not None
            and method == b"POST"
            and url in server.faces.paths
            and 0 < self.declared <= server.body_limit
            and not self.chunked_head
            and not self.upgrade_body
        ):
            exchange = server.faces.exchange(
                self, url, (method, http_version, self.headers), keep_alive
            )
            exchange.wants_continue = self.expect_continue
            self.current = exchange
            self._enqueue(exchange)
        else:
            state = server.lifespan.state
            scope = http_scope(
                method, url, http_version, self.headers, self.client, self.local, state, self.tls
            )
            exchange = AsgiExchange(
                self,
                server.app,
                scope,
                keep_alive=keep_alive,
                http10=http_version == "1.0",
                expect_continue=self.expect_continue,
            )
            self.current = exchange
            self._enqueue(exchange)

    def on_body(self, body: bytes) -> None:
        self.body_left -= len(body)
        self.current.feed(body)  # type: ignore[union-attr]

    def on_message_complete(self) -> None:
        if self.upgrade_body and not self.priming:
            return  # llhttp skipped the body to switch protocols: it is read on, unswitched
        self.in_message = False
        self.chunk_lines = None
        exchange, self.current = self.current, None
        exchange.end()  # type: ignore[union-attr]
        self._start_first()

    # Wire: what an exchange calls

    def write(self, data: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(data)

    async def drain(self) -> None:
        if self.write_paused and not self.transport.is_closing():
            if self.drained is None:
                self.drained = self.loop.create_future()
            await self.drained

    def hold_body(self, held: bool) -> None:
        self.body_held = held
        self._update_reading()

    def finish(self, keep_alive: bool) -> None:
        """The first exchange's response is out: close, or answer the next one."""
        if self.transport.is_closing():
            return
        queue = self.queue
        queue.popleft()
        if not keep_alive or self.draining or (self.reading_done and not queue):
            self._close()
            return
        self.active_at = self.loop.time()
        if self.in_head:
            self.head_started = self.active_at  # its header clock starts now
        self.body_held = False  # what the answered request left unread is read and dropped
        if self.read_paused:
            self._update_reading()
        if queue:
            self._start_first()

    def answer_error(self, error: ReachError) -> None:
        headers = _header_lines(error_headers(error.retry_after(), error.challenge()))
        self.write(_json_response(error.status, error_body(error), headers, False, False))
        self.finish(False)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = self.loop.create_task(coro)
        self.server.tasks.add(task)
        task.add_done_callback(self.server.task_done)

    def reply(self, exchange: _Invoke, answer: Answer, trace_id: str) -> None:
        """An invoke answer in one write."""
        keep_alive = exchange.keep_alive and not self.draining
        more = b""
        if answer.retry_after is not None or answer.challenge is not None:
            more = _header_lines(answer.error_headers())
        body = answer.body
        transport = self.transport
        if not transport.is_closing():
            transport.write(
                _INVOKE_ANSWER
                % (
                    STATUS_LINES.get(answer.status) or status_line(answer.status),
                    len(body),
                    trace_id.encode(),
                    self.server.node_header,
                    more,
                    b""
                    if keep_alive and not exchange.http10
                    else connection_header(keep_alive, True),
                    body,
                )
            )
        self.finish(keep_alive)

    # The server's

    def expired(self, now: float) -> bool:
        """Whether the client has kept this connection waiting too long."""
        if self.queue:  # answering: the client owes bytes only of the request in hand
            waiting = self.current is not None and len(self.queue) == 1 and not self.read_paused
            return waiting and now - self.active_at > self.server.timeouts.keep_alive_s
        if self.in_head:
            return now - self.head_started > self.server.timeouts.header_timeout_s
        return now - self.active_at > self.server.timeouts.keep_alive_s

    def shutdown(self) -> None:
        """Close now when idle, else after the response in progress."""
        self.draining = True
        if not self.queue:
            self.transport.close()

    # Inside

    def _enqueue(self, exchange: Exchange) -> None:
        queue = self.queue
        queue.append(exchange)
        if len(queue) == 1:
            self._start_first()
        elif len(queue) == 2:
            self._update_reading()  # pipelined: read on once the first is answered

    def _start_first(self) -> None:
        if self.queue:
            first = self.queue[0]
            if first.ready:
                if not first.started:
                    first.start()
            elif first.wants_continue:  # its turn has come: now it may send its body
                first.wants_continue = False
                self.write(CONTINUE)

    def _close(self) -> None:
        """Close; after a refusal whose request may still be arriving, half-close and
        discard what comes for `LINGER_S` or `LINGER_BYTES`, whichever ends first."""
        transport = self.transport
        if not (self.refused or self.in_message) or not transport.can_write_eof():
            transport.close()
            return
        self.linger_left = LINGER_BYTES
        transport.write_eof()
        self.linger_timer = self.loop.call_later(LINGER_S, transport.close)
        self.read_paused = False
        transport.resume_reading()

    def _read_on_after_upgrade(self, rest: bytes) -> None:
        """A new parser, primed with a head of the same framing, reads the body on."""
        if self.declared:
            framing = b"content-length: %d" % self.declared
        else:
            framing = b"transfer-encoding: chunked"
        self.parser = _request_parser(self)
        self.priming = True
        self.parser.feed_data(b"POST / HTTP/1.1\r\nhost: -\r\n%s\r\n\r\n" % framing)
        self.priming = False
        self.upgrade_body = False
        self.body_left = self.declared
        self.chunk_lines = None if self.declared else ChunkLines()
        if rest:
            self.data_received(rest)

    def _refuse(self, error: ReachError) -> None:
        """No more requests: the one arriving, or the next, is answered with `error`."""
        self.refused = True
        self._end_reading()
        self.in_head = self.in_message = False
        current, self.current = self.current, None
        if current is not None and not current.absorb(error):
            if current.started:
                self.transport.close()  # its body broke off while the app read it
                return
            self.queue.remove(current)
            current = None
        if current is None:
            self._enqueue(_Refusal(self, error))
        self._start_first()

    def _end_reading(self) -> None:
        self.reading_done = True
        self._update_reading()

    def _update_reading(self) -> None:
        paused = self.reading_done or self.write_paused or self.body_held or len(self.queue) > 1
        if paused is not self.read_paused and not self.transport.is_closing():
            self.read_paused = paused
            if paused:
                self.transport.pause_reading()
            else:
                self.transport.resume_reading()

    def _wake_writer(self) -> None:
        if self.drained is not None:
            if not self.drained.done():
                self.drained.set_result(None)
            self.drained = None


class _Invoke:
    """`POST /v1/invoke`: the body collected as it arrives, answered once it is whole."""

    __slots__ = (
        "chunks",
        "connection",
        "error",
        "headers",
        "http10",
        "keep_alive",
        "peer",
        "ready",
        "service",
        "size",
        "started",
        "stream",
        "wants_continue",
    )

    def __init__(
        self,
        connection: HttpConnection,
        service: InvokeService,
        headers: list[tuple[bytes, bytes]],
        keep_alive: bool,
        http10: bool,
        peer: PeerCertificate | None,
    ) -> None:
        self.connection = connection
        self.service = service
        self.headers = headers
        self.keep_alive = keep_alive
        self.http10 = http10
        self.peer = peer
        self.chunks: list[bytes] = []
        self.size = 0
        self.error: ReachError | None = None
        self.ready = self.started = self.wants_continue = False
        self.stream: EventStream | None = None  # the agent's stream being relayed

    def start(self) -> None:
        self.started = True
        self.connection.spawn(self._answer())

    def feed(self, body: bytes) -> None:
        self.size += len(body)
        limit = self.connection.server.body_limit
        if self.size > limit:
            raise body_too_large(limit)
        self.chunks.append(body)

    def end(self) -> None:
        self.ready = True

    def absorb(self, error: ReachError) -> bool:
        """Answered through `answer_invoke` as the body it could not read (413, 400)."""
        self.error = error
        self.keep_alive = False  # the rest of the request was never read
        self.ready = True
        return True

    @property
    def ends_on_eof(self) -> bool:
        return self.stream is not None

    def disconnect(self) -> None:
        """The answer is still made (the agent may be called already); it goes nowhere.
        A stream being relayed stops: the agent's connection is closed."""
        abort_stream(self.stream)

    async def _refused_body(self, declared: int | None) -> bytes:
        assert self.error is not None  # only read when the body could not be
        raise self.error

    async def _answer(self) -> None:
        chunks = self.chunks
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        try:
            answer, trace_id = await answer_invoke(
                self.service,
                self.headers,
                body if self.error is None else self._refused_body,
                self.peer,
            )
        except Exception:
            log.exception("request_failed", path=_INVOKE.decode())
            self.connection.answer_error(ReachError(INTERNAL_ERROR))
            return
        if answer.stream is not None:
            await self._relay(answer, trace_id)
            return
        self.connection.reply(self, answer, trace_id)

    async def _relay(self, answer: Answer, trace_id: str) -> None:
        connection = self.connection
        self.stream = answer.stream
        if connection.transport.is_closing():
            abort_stream(self.stream)  # the caller left while the agent was being reached
        headers = b"x-trace-id: %s\r\n%s" % (trace_id.encode(), connection.server.node_header)
        try:
            await relay_answer(
                connection, answer, headers, keep_alive=self.keep_alive, http10=self.http10
            )
        except Exception:
            log.exception("stream_failed", path=_INVOKE.decode())
            connection.transport.close()


class _Refusal:
    """A request refused before any handler saw it: its JSON error, then close."""

    __slots__ = ("connection", "error", "keep_alive", "started")

    ready = True
    wants_continue = False

    def __init__(self, connection: HttpConnection, error: ReachError) -> None:
        self.connection = connection
        self.error = error
        self.keep_alive = False
        self.started = False

    def start(self) -> None:
        self.started = True
        self.connection.answer_error(self.error)

    def feed(self, body: bytes) -> None:
        """Never called: nothing is read after a refusal."""

    def end(self) -> None:
        """Never called: nothing is read after a refusal."""

    def absorb(self, error: ReachError) -> bool:
        return False

    def disconnect(self) -> None:
        """Nothing to stop."""


def _request_parser(connection: HttpConnection) -> httptools.HttpRequestParser:
    """llhttp as strict as it comes, but for the optional whitespace RFC 9112 §7.1.1
    allows between a chunk size and its extensions (`5 ;name=value`)."""
    parser = httptools.HttpRequestParser(connection)
    parser.set_dangerous_leniencies(lenient_spaces_after_chunk_size=True)
    return parser


def _check_request_line(http_version: str, hosts: int) -> None:
    """HTTP/1.0 and 1.1 only; HTTP/1.1 with exactly one Host, 1.0 with at most one
    (RFC 9112 §3.2: anything else is 400)."""
    if http_version not in _VERSIONS:
        raise VersionNotSupported(
            f"HTTP/{http_version} is not served here: use HTTP/1.1", versions=sorted(_VERSIONS)
        )
    if hosts > 1 or (hosts == 0 and http_version == "1.1"):
        raise InvalidRequest("an HTTP/1.1 request carries exactly one Host header", code="bad_host")


# `_json_response` of an invoke answer, its x-trace-id and x-reach-node lines made in the
# same step: status line, length, trace id, node line, error header lines, Connection, body.
_INVOKE_ANSWER = (
    b"%scontent-type: application/json\r\ncontent-length: %d\r\nx-trace-id: %s\r\n%s%s%s\r\n%s"
)


def _header_lines(headers: list[tuple[str, str]]) -> bytes:
    return b"".join(b"%s: %s\r\n" % (name.encode(), value.encode()) for name, value in headers)


def _json_response(
    status: int, body: bytes, headers: bytes, keep_alive: bool, http10: bool
) -> bytes:
    return b"%scontent-type: application/json\r\ncontent-length: %d\r\n%s%s\r\n%s" % (
        status_line(status),
        len(body),
        headers,
        connection_header(keep_alive, http10),
        body,
    )
