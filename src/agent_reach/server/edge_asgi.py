"""The edge server's ASGI side: one request cycle per request, and the lifespan protocol.

A minimal ASGI 3 adapter (spec 2.3, as uvicorn's httptools protocol reports): the
app reads the body as it arrives, `http.disconnect` once the client has gone or the
response is complete; the response goes out with the app's Content-Length, else
chunked (HTTP/1.0: delimited by closing), never a body for HEAD, 1xx, 204 and 304.
The connection (`edge_connection.py`) frames requests and owns the socket; a cycle
talks to it through `Wire`.
"""

from __future__ import annotations

import asyncio
import re
import traceback
from collections.abc import Awaitable, Callable, Coroutine
from http import HTTPStatus
from typing import Any, Protocol
from urllib.parse import unquote

import httptools
import structlog

from agent_reach.errors import InvalidRequest, ReachError

log = structlog.get_logger("agent_reach.server")

Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Message, Receive, Send], Awaitable[None]]

ASGI_VERSION = {"version": "3.0", "spec_version": "2.3"}
# Body bytes held for an app that has not read them yet before the connection stops
# reading: uvicorn's HIGH_WATER_LIMIT.
BODY_HIGH_WATER = 64 * 1024
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
CLOSE = b"connection: close\r\n"
KEEP_ALIVE = b"connection: keep-alive\r\n"  # HTTP/1.0 closes unless told otherwise
STATUS_LINES = {s.value: b"HTTP/1.1 %d %s\r\n" % (s.value, s.phrase.encode()) for s in HTTPStatus}
_UNSAFE_HEADER = re.compile(rb"[\x00\r\n]")  # would split the head: response splitting
INTERNAL_ERROR = "internal error; the coordinator log has details"


def status_line(status: int) -> bytes:
    """`HTTP/1.1 <status> <reason>` and its CRLF (an empty reason for unknown codes)."""
    line = STATUS_LINES.get(status)
    if line is None:
        if not 100 <= status <= 999:
            raise RuntimeError(f"invalid HTTP status {status}")
        line = b"HTTP/1.1 %d \r\n" % status
    return line


def connection_header(keep_alive: bool, http10: bool) -> bytes:
    """The Connection header a response needs, if any."""
    if not keep_alive:
        return CLOSE
    return KEEP_ALIVE if http10 else b""


class Wire(Protocol):
    """The connection as a request cycle sees it."""

    draining: bool  # the server is shutting down: this response is the last one

    def write(self, data: bytes) -> None:
        """Send bytes; nothing once the connection is closing."""

    async def drain(self) -> None:
        """Return once the client reads again (or has gone)."""

    def hold_body(self, held: bool) -> None:
        """Stop (or resume) reading while the app leaves its body unread."""

    def finish(self, keep_alive: bool) -> None:
        """The response is complete: close, or answer the next request."""

    def answer_error(self, error: ReachError) -> None:
        """Answer `error` as JSON and close."""

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run `coro` as a task the server waits for at shutdown."""


def http_scope(
    method: bytes,
    url: bytes,
    http_version: str,
    headers: list[tuple[bytes, bytes]],
    client: tuple[str, int],
    server: tuple[str, int],
    state: dict[str, Any],
    tls: Message | None = None,
) -> Message:
    """The ASGI `http` scope of one request; `InvalidRequest` for a target that is not
    a valid path. `tls`: the connection's TLS extension (`identity.certificates`)."""
    try:
        parsed = httptools.parse_url(url)
        raw_path: bytes = parsed.path
        path = raw_path.decode("ascii")
    except (httptools.HttpParserInvalidURLError, UnicodeDecodeError):
        raise InvalidRequest("the request target is not a valid URL", code="invalid_url") from None
    scope = {
        "type": "http",
        "asgi": ASGI_VERSION,
        "http_version": http_version,
        "method": method.decode("ascii"),
        "scheme": "http" if tls is None else "https",
        "path": unquote(path) if "%" in path else path,
        "raw_path": raw_path,
        "query_string": parsed.query or b"",
        "root_path": "",
        "headers": headers,
        "client": client,
        "server": server,
        "state": state.copy(),  # the lifespan's state, shallow-copied per request (ASGI spec)
    }
    if tls is not None:
        scope["extensions"] = {"tls": tls}
    return scope


class AsgiExchange:
    """One request handed to the ASGI app: its body as it arrives, its response framed."""

    __slots__ = (
        "app",
        "body_done",
        "buffered",
        "chunked",
        "chunks",
        "complete",
        "discard",
        "disconnected",
        "ends_on_eof",
        "expect_continue",
        "head",
        "held",
        "http10",
        "keep_alive",
        "remaining",
        "response_complete",
        "response_started",
        "scope",
        "started",
        "waiter",
        "wire",
    )

    ready = True  # the app starts as soon as the head is in
    wants_continue = False  # the app's first read sends the 100 Continue

    def __init__(
        self,
        wire: Wire,
        app: ASGIApp,
        scope: Message,
        *,
        keep_alive: bool,
        http10: bool,
        expect_continue: bool,
    ) -> None:
        self.wire = wire
        self.app = app
        self.scope = scope
        self.keep_alive = keep_alive
        self.http10 = http10
        self.expect_continue = expect_continue
        self.started = False
        self.chunks: list[bytes] = []
        self.buffered = 0
        self.held = False
        self.complete = False  # the whole body has arrived
        self.body_done = False  # ... and the app has read it
        self.disconnected = False
        self.waiter: asyncio.Future[None] | None = None
        self.response_started = False
        self.response_complete = False
        self.head: bytes | None = None  # written with the first body bytes
        self.chunked = False
        self.discard = False  # HEAD, 1xx, 204, 304: no body on the wire
        self.remaining: int | None = None  # Content-Length still to send
        # An event stream's client that sends EOF has gone (`edge_stream`): the app is
        # told `http.disconnect` at once, not when a write fails.
        self.ends_on_eof = False

    # What the connection calls.

    def start(self) -> None:
        self.started = True
        self.wire.spawn(self._run())

    def feed(self, body: bytes) -> None:
        if self.response_complete:
            return  # answered without reading it all: the rest is dropped
        self.chunks.append(body)
        self.buffered += len(body)
        if self.buffered > BODY_HIGH_WATER and not self.held:
            self.held = True
            self.wire.hold_body(True)
        self._wake()

    def end(self) -> None:
        """The whole body has arrived."""
        self.complete = True
        self._wake()

    def absorb(self, error: ReachError) -> bool:
        """A broken request is not the app's to answer."""
        return False

    def disconnect(self) -> None:
        self.disconnected = True
        self._wake()

    # The ASGI callables.

    async def receive(self) -> Message:
        while not (self.disconnected or self.response_complete):
            if self.chunks or (self.complete and not self.body_done):
                body = self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)
                self.chunks.clear()
                self.buffered = 0
                if self.held:
                    self.held = False
                    self.wire.hold_body(False)
                self.body_done = self.complete
                return {"type": "http.request", "body": body, "more_body": not self.complete}
            if self.expect_continue:
                self.expect_continue = False
                self.wire.write(CONTINUE)
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if not self.response_started:
            if kind != "http.response.start":
                raise RuntimeError(f"expected http.response.start, got {kind!r}")
            self._start_response(message)
            return
        if kind != "http.response.body" or self.response_complete:
            raise RuntimeError(f"unexpected ASGI message {kind!r}")
        more_body = message.get("more_body", False)
        if self.disconnected:
            self.response_complete = not more_body
            return
        data = self._frame(message.get("body", b""), more_body)
        if self.head is not None:
            data = self.head + data
            self.head = None
        if data:
            await self.wire.drain()
            self.wire.write(data)
        if not more_body:
            self.response_complete = True
            self._wake()
            self.wire.finish(self.keep_alive)

    # Inside.

    async def _run(self) -> None:
        try:
            await self.app(self.scope, self.receive, self.send)
        except Exception:
            log.exception("request_failed", path=self.scope["path"])
        else:
            if not (self.response_complete or self.disconnected):
                log.error("response_incomplete", path=self.scope["path"])
        if self.response_complete or self.disconnected:
            return  # the answer is out (a background task failed), or nobody waits for it
        self.response_complete = True
        if self.response_started and self.head is None:
            self.wire.finish(False)  # part of the answer is out: only closing ends it
        else:
            self.wire.answer_error(ReachError(INTERNAL_ERROR))

    def _start_response(self, message: Message) -> None:
        status: int = message["status"]
        lines = [status_line(status)]
        length: int | None = None
        keep_alive = self.keep_alive and not self.wire.draining
        for name, value in message.get("headers", ()):
            if _UNSAFE_HEADER.search(name) or _UNSAFE_HEADER.search(value):
                raise RuntimeError("a response header holds CR, LF or NUL")
            lower = name.lower()
            if lower == b"connection":
                keep_alive = keep_alive and value.lower() != b"close"
                continue  # hop-by-hop: the server says it once, below
            if lower == b"transfer-encoding":
                continue  # the server frames the body
            if lower == b"content-length":
                length = int(value)
            elif lower == b"content-type":
                self.ends_on_eof = value.lower().startswith(b"text/event-stream")
            lines.append(b"%s: %s\r\n" % (name, value))
        if self.scope["method"] == "HEAD" or status < 200 or status in (204, 304):
            self.discard = True
        elif length is not None:
            self.remaining = length
        elif not self.http10:
            self.chunked = True
            lines.append(b"transfer-encoding: chunked\r\n")
        else:
            keep_alive = False  # HTTP/1.0 without a length: the body ends with the connection
        self.keep_alive = keep_alive
        lines.append(connection_header(keep_alive, self.http10))
        lines.append(b"\r\n")
        self.head = b"".join(lines)
        self.response_started = True

    def _frame(self, body: bytes, more_body: bool) -> bytes:
        if self.discard:
            return b""
        if self.chunked:
            data = b"%x\r\n%s\r\n" % (len(body), body) if body else b""
            return data if more_body else data + b"0\r\n\r\n"
        if self.remaining is not None:
            self.remaining -= len(body)
            if self.remaining < 0 or (not more_body and self.remaining):
                raise RuntimeError("the response body does not match its Content-Length")
        return body

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


class StartupFailed(RuntimeError):
    """The app's lifespan startup failed; the message is the app's own."""


class Lifespan:
    """The ASGI lifespan protocol against the app: startup before serving, shutdown after.

    An app that returns at once (it has no lifespan) starts and stops as a no-op.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.state: dict[str, Any] = {}
        self._inbox: asyncio.Queue[Message] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._started: asyncio.Future[str | None] | None = None
        self._stopped: asyncio.Future[str | None] | None = None

    async def startup(self) -> None:
        """Returns once the app has started; `StartupFailed` with its message if not."""
        loop = asyncio.get_running_loop()
        self._started, self._stopped = loop.create_future(), loop.create_future()
        self._task = loop.create_task(self._run(self._started, self._stopped))
        await self._inbox.put({"type": "lifespan.startup"})
        failure = await self._started
        if failure is not None:
            self._task.cancel()  # a failed app is not waited for
            raise StartupFailed(failure)

    async def shutdown(self) -> None:
        """Run the app's shutdown; a failure is logged, since the server stops anyway."""
        if self._task is None or self._stopped is None:
            return
        await self._inbox.put({"type": "lifespan.shutdown"})
        failure = await self._stopped
        await self._task
        if failure is not None:
            log.error("shutdown_failed", error=failure)

    async def _run(
        self, started: asyncio.Future[str | None], stopped: asyncio.Future[str | None]
    ) -> None:
        async def send(message: Message) -> None:
            kind: str = message["type"]  # lifespan.{startup,shutdown}.{complete,failed}
            failure = (message.get("message") or kind) if kind.endswith(".failed") else None
            _settle(started if kind.startswith("lifespan.startup.") else stopped, failure)

        scope = {"type": "lifespan", "asgi": ASGI_VERSION, "state": self.state}
        try:
            await self.app(scope, self._inbox.get, send)
        except Exception:
            failure = traceback.format_exc()
            _settle(started, failure)
            _settle(stopped, failure)
        else:
            _settle(started, None)
            _settle(stopped, None)


def _settle(future: asyncio.Future[str | None], value: str | None) -> None:
    if not future.done():
        future.set_result(value)
