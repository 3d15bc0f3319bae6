"""A pooled HTTP/1.1 keep-alive client for deliveries: asyncio Protocols + httptools.

Why hand-written: forwarding a delivery is the coordinator's hot path, and a
general client eats the budget: reaching 20% of nginx at 64 connections leaves
the coordinator ~60 µs of CPU per request in all (on this machine's core that it
shares with the agent; README, "Performance"). Measured with
`bench/overhead.py` on this 2-core machine (a raw ASGI forwarder under uvicorn,
uvloop + httptools, 148-byte JSON POST, wrk at 64 connections), forwarder CPU
per request: httpx ~1,700 µs, aiohttp ClientSession 140 µs, pyreqwest 70 µs,
this pool 54 µs; throughput as a share of nginx in the same run: 0.02, 0.17,
0.30 and 0.31. In a client-only loop at 64 in flight the pool itself costs
~13 µs per request (pyreqwest 34 µs, aiohttp 87 µs).

What it does: one connection serves one exchange at a time; a connection goes
back to its origin's pool only when the response allowed keep-alive and was
read to the end; one future and one timer per request; the response parser
fills that future from the protocol callbacks. A request is sent again (once, on
another connection) only when it provably never left: its write failed (the
peer had reset the connection before it). Once it was written, a close or reset
without an answer byte is `ConnectionLost(sent=True)` even on a reused
connection (the keep-alive race): the peer may have read it and acted, so only
the caller's re-send rules (the attempt loop's `retries`) may send it again.
Redirects are returned, never followed. A pool is bound to the event loop that
first uses it.
"""

from __future__ import annotations

import asyncio
import re
import select
import ssl
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httptools

# 512 per origin: above the 64-way concurrency the overhead goal is set at, and
# well below the default 1024 open files of one process.
MAX_CONNECTIONS_PER_ORIGIN = 512
# Linux retransmits an unanswered SYN after 1 s (the initial RTO of RFC 6298), then
# after 3 s: a listen backlog that overflows for a moment (Python's http.server keeps 5)
# drops the first SYN, so a connect needs time for the first retransmission and a
# round trip after it.
CONNECT_TIMEOUT_S = 2.5
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
# 4 s: below uvicorn's 5 s keep-alive timeout (and nginx's 75 s), so we usually close
# an idle connection before the agent does, and the keep-alive race stays rare.
IDLE_TIMEOUT_S = 4.0
# Agent endpoints are few; the bound only stops a caller-built URL stream from growing memory.
_URL_CACHE_SIZE = 1024
_NAME_CACHE_SIZE = 1024

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_NO_BODY_METHODS = frozenset({"GET", "HEAD"})
_POOL_HEADERS = frozenset({"host", "content-length", "transfer-encoding"})
_checked_names: set[str] = set()
# TLS alerts by which a server refuses the client's side of the handshake. Under TLS 1.3
# they arrive after the client has finished its side, so after the request was written,
# but the server never read it (it reads application data only after the handshake).
_HANDSHAKE_REFUSALS = frozenset(
    {
        "TLSV13_ALERT_CERTIFICATE_REQUIRED",
        "SSLV3_ALERT_BAD_CERTIFICATE",
        "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
        "SSLV3_ALERT_CERTIFICATE_EXPIRED",
        "SSLV3_ALERT_CERTIFICATE_REVOKED",
        "SSLV3_ALERT_UNSUPPORTED_CERTIFICATE",
        "TLSV1_ALERT_UNKNOWN_CA",
        "TLSV1_ALERT_ACCESS_DENIED",
    }
)


Resolve = Callable[[str], Awaitable[str]]


class PoolError(Exception):
    """Root of every error the pool raises."""


class ConnectFailed(PoolError):
    """Nothing was sent: the name did not resolve, the connect was refused or timed out."""


class ConnectTimedOut(ConnectFailed):
    """Nothing was sent: the connect got no answer in time (a full backlog drops SYNs)."""


class RequestTimeout(PoolError):
    """The request did not complete within `timeout_s`; `sent` says if bytes reached the socket."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


class ConnectionLost(PoolError):
    """The connection closed or reset mid-exchange; with `sent` the peer may have acted."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


class ResponseTooLarge(PoolError):
    """The response body exceeded `max_response_bytes`; the connection was closed."""


class InvalidResponse(PoolError):
    """The peer answered something that is not HTTP/1.x; the connection was closed."""


class _Unsent(Exception):
    """The request's write failed: it never reached the peer and may be sent again."""


class _StopParsing(Exception):
    """Raised in a parser callback to stop the parser; the exchange is already settled."""


@dataclass(slots=True)
class Response:
    """One complete HTTP response; header names are lower-cased."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes


class _Connection(asyncio.Protocol):
    """One keep-alive connection; it carries at most one exchange at a time."""

    __slots__ = (
        "_body",
        "_body_size",
        "_closed",
        "_framed",
        "_fut",
        "_got_bytes",
        "_headers",
        "_headers_done",
        "_is_head",
        "_keep_alive",
        "_origin",
        "_parser",
        "_poller",
        "_timer",
        "_transport",
        "_unsent",
        "idle_since",
        "is_idle",
    )

    _transport: asyncio.Transport  # set by connection_made, before the pool sees the connection
    _timer: asyncio.TimerHandle  # set by send, with _fut

    def __init__(self, origin: _Origin) -> None:
        self._origin = origin
        self._parser = httptools.HttpResponseParser(self)
        self._fut: asyncio.Future[Response] | None = None
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._body_size = 0
        self._framed = False
        self._headers_done = False
        self._got_bytes = False
        self._is_head = False
        self._keep_alive = False
        self._unsent = False
        self._closed = False
        self._poller: select.poll | None = None  # None for TLS: it reads records on its own
        self.is_idle = False
        self.idle_since = 0.0

    # -- driven by the pool ---------------------------------------------------

    def send(self, payload: bytes, deadline: float, *, is_head: bool) -> asyncio.Future[Response]:
        """Write one request; the future gets the response or a PoolError (`_Unsent`
        when the write itself failed)."""
        loop = self._origin.loop
        fut: asyncio.Future[Response] = loop.create_future()
        self._fut = fut
        self._got_bytes = False
        self._is_head = is_head
        self._timer = loop.call_at(deadline, self._on_timeout)
        transport = self._transport
        transport.write(payload)
        # A write that fails (the peer reset the connection before it: EPIPE, ECONNRESET)
        # closes the transport at once and nothing reached the peer; connection_lost follows.
        self._unsent = transport.is_closing() and not self._closed
        return fut

    def is_closing(self) -> bool:
        return self._closed or self._transport.is_closing()

    def is_usable(self) -> bool:
        """Open, and nothing arrived while idle. A FIN or RST the loop has not read yet
        is seen here, before the write: once a request is written, a close without an
        answer leaves its outcome unknown (the keep-alive race). Stray bytes on an idle
        connection mean the stream is out of step: not usable either."""
        if self._closed or self._transport.is_closing():
            return False
        return self._poller is None or not self._poller.poll(0)

    def close(self) -> None:
        """Close at once, give the slot back; an exchange in flight is dropped unanswered."""
        self._detach()
        if not self._closed:
            self._closed = True
            self._transport.abort()
            self._origin.drop(self)

    def abandon(self, fut: asyncio.Future[Response]) -> None:
        """The caller gave up on `fut`: a half-read exchange makes the connection unusable."""
        if self._fut is fut:
            self.close()

    def fail(self, exc: BaseException) -> None:
        """End the exchange in flight with `exc` and close the connection."""
        self._reject(exc)
        self.close()

    def _reject(self, exc: BaseException) -> None:
        fut = self._detach()
        if fut is not None and not fut.done():
            fut.set_exception(exc)

    def _detach(self) -> asyncio.Future[Response] | None:
        fut = self._fut
        if fut is not None:
            self._fut = None
            self._timer.cancel()
        return fut

    def _complete(self, keep_alive: bool) -> None:
        fut = self._detach()
        self._keep_alive = keep_alive
        # The chunks go with the exchange: a kept-alive connection holding its last
        # answer's chunks until the next one held 2 MB per idle connection (bench/memory.py).
        chunks, self._body = self._body, []
        if fut is not None and not fut.done():
            status = self._parser.get_status_code()
            fut.set_result(Response(status, self._headers, b"".join(chunks)))

    def _on_timeout(self) -> None:
        self.fail(RequestTimeout("no complete response within the timeout", sent=True))

    # -- asyncio.Protocol -----------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # always a Transport for TCP
        if transport.get_extra_info("sslcontext") is None:
            # One poller per connection, made once: the idle check is then one poll(2).
            # poll, not select: select refuses descriptors from FD_SETSIZE (1024) up,
            # which a busy coordinator reaches.
            self._poller = select.poll()
            self._poller.register(transport.get_extra_info("socket").fileno(), select.POLLIN)

    def data_received(self, data: bytes) -> None:
        if self._fut is None:  # nothing was asked: the stream is out of step
            self.close()
            return
        self._got_bytes = True
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            # After a callback stopped the parser (too large, unsolicited) the future is settled.
            self.fail(InvalidResponse(f"unparseable HTTP response: {exc}"))
            return
        if self._fut is None:
            if self._keep_alive:
                self._origin.release(self)
            else:
                self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._closed:  # we closed it, and gave the slot back then
            return
        self._closed = True
        if self._fut is not None:
            if self._got_bytes and exc is None and self._headers_done and not self._framed:
                self._complete(keep_alive=False)  # the body was delimited by the close
            elif self._unsent:
                self._reject(_Unsent())
            elif not self._got_bytes and (refusal := _handshake_refusal(exc)) is not None:
                name = self._origin.name
                self._reject(ConnectFailed(f"{name} refused the TLS handshake ({refusal})"))
            else:
                self._reject(ConnectionLost("the connection closed mid-exchange", sent=True))
        self._origin.drop(self)

    # -- httptools callbacks --------------------------------------------------

    def on_message_begin(self) -> None:
        if self._fut is None:
            raise _StopParsing  # a response nobody asked for
        self._headers = []
        self._body = []
        self._body_size = 0
        self._framed = False
        self._headers_done = False

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-length" or name == b"transfer-encoding":
            self._framed = True
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._headers_done = True
        # A HEAD answer has no body whatever its framing says; llhttp cannot be told, so the
        # response ends here and the connection is not reused.
        if self._is_head and self._parser.get_status_code() >= 200:
            self._complete(keep_alive=False)

    def on_body(self, body: bytes) -> None:
        self._body_size += len(body)
        if self._body_size > self._origin.pool.max_response_bytes:
            limit = self._origin.pool.max_response_bytes
            self.fail(ResponseTooLarge(f"response body over {limit} bytes"))
            raise _StopParsing
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self._fut is None:  # a HEAD answer, already delivered
            return
        status = self._parser.get_status_code()
        if status < 200 and status != 101:  # 100 Continue, 103 Early Hints: the answer follows
            return
        self._complete(self._parser.should_keep_alive())


class _Origin:
    """The connections to one scheme://host:port: idle ones (LIFO), a slot count, waiters."""

    __slots__ = ("conns", "host", "idle", "loop", "name", "pool", "port", "size", "ssl", "waiters")

    def __init__(
        self, pool: HttpPool, name: str, host: str, port: int, ssl_context: ssl.SSLContext | None
    ) -> None:
        self.pool = pool
        self.loop = asyncio.get_running_loop()
        self.name = name
        self.host = host
        self.port = port
        self.ssl = ssl_context
        self.idle: deque[_Connection] = deque()
        self.conns: set[_Connection] = set()
        self.size = 0  # open or opening connections, each holding a slot
        self.waiters: deque[asyncio.Future[_Connection | None]] = deque()

    def take_idle(self, cutoff: float) -> _Connection | None:
        """The most recently used live idle connection, closing expired ones on the way."""
        idle = self.idle
        while idle:
            conn = idle.pop()
            conn.is_idle = False
            if conn.idle_since > cutoff and conn.is_usable():
                return conn
            conn.close()
        return None

    async def acquire(self, deadline: float) -> _Connection:
        """A connection for one exchange: a new one while under the limit, else wait for one."""
        while True:
            if self.pool.closed:
                raise PoolError("the pool is closed")
            if self.size < self.pool.max_connections:
                self.size += 1
                return await self._connect(deadline)
            conn = await self._wait(deadline)
            if conn is None:  # a closed connection's slot was handed to us
                return await self._connect(deadline)
            if conn.is_usable():
                return conn
            conn.close()  # closed while being handed over: its slot went on, wait again

    def release(self, conn: _Connection) -> None:
        """A connection whose exchange ended cleanly: to the first waiter, else idle."""
        waiters = self.waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        conn.is_idle = True
        conn.idle_since = self.loop.time()
        self.idle.append(conn)
        self.pool.schedule_sweep()

    def drop(self, conn: _Connection) -> None:
        """A connection closed: forget it and hand its slot on."""
        self.conns.discard(conn)
        if conn.is_idle:
            conn.is_idle = False
            self.idle.remove(conn)
        self._pass_slot()

    def close_all(self) -> None:
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_exception(PoolError("the pool is closed"))
        for conn in list(self.conns):
            conn.fail(ConnectionLost("the pool was closed", sent=True))

    def _pass_slot(self) -> None:
        waiters = self.waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.size -= 1

    async def _wait(self, deadline: float) -> _Connection | None:
        waiter: asyncio.Future[_Connection | None] = self.loop.create_future()
        self.waiters.append(waiter)
        timer = self.loop.call_at(deadline, _expire_waiter, waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            # Handed a connection or a slot just as we were cancelled: pass it on.
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                conn = waiter.result()
                if conn is None:
                    self._pass_slot()
                else:
                    self.release(conn)
            raise
        finally:
            timer.cancel()

    async def _connect(self, deadline: float) -> _Connection:
        """Open a connection into the slot already taken; the slot is given back on failure."""
        budget = deadline - self.loop.time()
        limit = min(budget, self.pool.connect_timeout_s)
        try:
            async with asyncio.timeout(limit):
                address = (
                    self.host if self.pool.resolve is None else await self.pool.resolve(self.host)
                )
                _, conn = await self.loop.create_connection(
                    lambda: _Connection(self),
                    address,
                    self.port,
                    ssl=self.ssl,
                    server_hostname=self.host if self.ssl is not None else None,
                )
        except TimeoutError:
            self._pass_slot()
            raise ConnectTimedOut(f"connect to {self.name} timed out after {limit:g} s") from None
        except OSError as exc:
            self._pass_slot()
            raise ConnectFailed(f"cannot connect to {self.name}: {exc}") from exc
        except BaseException:
            self._pass_slot()
            raise
        self.conns.add(conn)
        if self.pool.closed:
            conn.close()
            raise PoolError("the pool is closed")
        if conn.is_closing():
            conn.close()
            raise ConnectFailed(f"{self.name} closed the connection before the request was sent")
        return conn


def _expire_waiter(waiter: asyncio.Future[_Connection | None]) -> None:
    if not waiter.done():
        waiter.set_exception(RequestTimeout("no connection became free in time", sent=False))


@dataclass(slots=True)
class _Target:
    origin: _Origin
    head: str  # " /path?query HTTP/1.1\r\nHost: host:port\r\n", the method goes first
    # method -> its request line and Host, encoded once (the standard methods only)
    lines: dict[str, bytes] = field(default_factory=dict)

    def encode(self, method: str, body: bytes, encoded: bytes) -> bytes:
        """The whole request with no headers but the pool's and `encoded`: one step."""
        line = self.lines.get(method)
        if line is None:
            if method not in _METHODS:
                return _encode_head(method, self.head, (), body, encoded) + body
            line = self.lines[method] = (method + self.head).encode("latin-1")
        if body or method not in _NO_BODY_METHODS:
            return b"%sContent-Length: %d\r\n%s\r\n%s" % (line, len(body), encoded, body)
        return b"%s%s\r\n%s" % (line, encoded, body)


class HttpPool:
    """Pooled HTTP/1.1 keep-alive client; one per process, created in the app's lifespan."""

    def __init__(
        self,
        *,
        max_connections_per_origin: int = MAX_CONNECTIONS_PER_ORIGIN,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        resolve: Resolve | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """`resolve`, when given, picks the address each new connection dials (and may
        refuse with `ConnectFailed`): the hook for an allow list checked at dial time.
        `ssl_context` is what https origins are dialled with (default: the system's
        trusted CAs, no client certificate)."""
        self.resolve = resolve
        self.max_connections = max_connections_per_origin
        self.connect_timeout_s = connect_timeout_s
        self.max_response_bytes = max_response_bytes
        self.idle_timeout_s = idle_timeout_s
        self.closed = False
        self._origins: dict[tuple[str, str, int], _Origin] = {}
        self._targets: dict[str, _Target] = {}
        self._ssl_context = ssl_context
        self._sweep: asyncio.TimerHandle | None = None

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Sequence[tuple[str, str]] = (),
        body: bytes = b"",
        timeout_s: float,
        encoded: bytes = b"",
    ) -> Response:
        """Send one request and read the whole response within `timeout_s`.

        `encoded`: more header lines, already encoded (``name: value`` and CRLF each)
        by a caller that made every byte of them (the delivery's own headers): they are
        sent as they are, unchecked. Raises ValueError before anything is sent for a bad
        URL, method or header (CR/LF included); otherwise a PoolError subclass. Any
        status, 3xx included, is a Response.
        """
        if self.closed:
            raise PoolError("the pool is closed")
        target = self._targets.get(url) or self._parse(url)
        if headers:
            payload = _encode_head(method, target.head, headers, body, encoded) + body
        else:
            payload = target.encode(method, body, encoded)
        origin = target.origin
        now = origin.loop.time()
        deadline = now + timeout_s
        is_head = method == "HEAD"
        conn = origin.take_idle(now - self.idle_timeout_s) or await origin.acquire(deadline)
        resent = False
        while True:
            fut = conn.send(payload, deadline, is_head=is_head)
            try:
                return await fut
            except _Unsent:
                if resent:
                    raise ConnectionLost(
                        "reset before the request was written", sent=False
                    ) from None
                resent = True
            except asyncio.CancelledError:
                conn.abandon(fut)
                raise
            conn = await origin.acquire(deadline)  # nothing was sent: a ConnectFailed says so

    async def probe(self, url: str, *, timeout_s: float) -> bool:
        """GET `url`: whether it answered 2xx within `timeout_s` (a health probe: any
        failure to get an answer is a no)."""
        try:
            response = await self.request("GET", url, timeout_s=timeout_s)
        except PoolError:
            return False
        return 200 <= response.status < 300

    async def aclose(self) -> None:
        """Close every connection; requests in flight fail with ConnectionLost."""
        self.closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for origin in self._origins.values():
            origin.close_all()
        await asyncio.sleep(0)  # let the transports run connection_lost and release sockets

    def schedule_sweep(self) -> None:
        """Make sure idle connections are looked at once they may have expired."""
        if self._sweep is None and not self.closed:
            loop = asyncio.get_running_loop()
            self._sweep = loop.call_later(self.idle_timeout_s, self._close_expired)

    def _close_expired(self) -> None:
        self._sweep = None
        loop = asyncio.get_running_loop()
        cutoff = loop.time() - self.idle_timeout_s
        oldest: float | None = None
        for origin in self._origins.values():
            idle = origin.idle  # oldest first: release appends, reuse pops from the right
            while idle and idle[0].idle_since <= cutoff:
                idle[0].close()
            if idle and (oldest is None or idle[0].idle_since < oldest):
                oldest = idle[0].idle_since
        if oldest is not None:
            self._sweep = loop.call_at(oldest + self.idle_timeout_s, self._close_expired)

    def _parse(self, url: str) -> _Target:
        if not url.isascii() or any(c <= " " or c == "\x7f" for c in url):
            raise ValueError(f"URL must be ASCII without spaces or control characters: {url!r}")
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise ValueError(f"unsupported URL scheme {scheme!r}: {url!r}")
        host = parts.hostname
        if not host:
            raise ValueError(f"URL has no host: {url!r}")
        if parts.username is not None:
            raise ValueError(f"credentials in the URL are not supported: {url!r}")
        port = parts.port or (443 if scheme == "https" else 80)
        key = (scheme, host, port)
        origin = self._origins.get(key)
        if origin is None:
            ssl_context = self._ssl() if scheme == "https" else None
            name = f"{scheme}://{parts.netloc}"
            origin = self._origins[key] = _Origin(self, name, host, port, ssl_context)
        path = parts.path or "/"
        if parts.query:
            path = f"{path}?{parts.query}"
        target = _Target(origin, f" {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n")
        if len(self._targets) >= _URL_CACHE_SIZE:
            del self._targets[next(iter(self._targets))]
        self._targets[url] = target
        return target

    def _ssl(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            self._ssl_context = ssl.create_default_context()
        return self._ssl_context


def _handshake_refusal(exc: Exception | None) -> str | None:
    """The alert, readable, when `exc` is a server refusing our side of the handshake."""
    if isinstance(exc, ssl.SSLError) and exc.reason in _HANDSHAKE_REFUSALS:
        return str(exc.reason).lower().replace("_", " ")
    return None


def _encode_head(
    method: str,
    head: str,
    headers: Sequence[tuple[str, str]],
    body: bytes,
    encoded: bytes = b"",
) -> bytes:
    """The request line and headers (`encoded` last, as it is); refuses anything in
    `method` or `headers` that could split the message."""
    if method not in _METHODS and not _TOKEN.fullmatch(method):
        raise ValueError(f"invalid HTTP method {method!r}")
    parts = [method, head]
    if body or method not in _NO_BODY_METHODS:
        parts += ("Content-Length: ", str(len(body)), "\r\n")
    for name, value in headers:
        if name not in _checked_names:
            _check_name(name)
        if "\r" in value or "\n" in value or "\0" in value:
            raise ValueError(f"header {name!r} has CR, LF or NUL in its value")
        parts += (name, ": ", value, "\r\n")
    if not encoded:
        parts.append("\r\n")
        return "".join(parts).encode("latin-1")
    return b"%s%s\r\n" % ("".join(parts).encode("latin-1"), encoded)


def _check_name(name: str) -> None:
    if not _TOKEN.fullmatch(name):
        raise ValueError(f"invalid header name {name!r}")
    if name.lower() in _POOL_HEADERS:
        raise ValueError(f"header {name!r} is set by the pool")
    if len(_checked_names) >= _NAME_CACHE_SIZE:
        _checked_names.clear()
    _checked_names.add(name)
