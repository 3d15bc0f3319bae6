"""The coordinator's HTTP/1.1 server: `POST /v1/invoke` on bare asyncio Protocols, the
rest of the API through ASGI, on one port.

Why hand-written: measured with bench/overhead.py on this 2-core machine (wrk -t1 on
one core, servers on the other, 64 connections), a bare raw-ASGI forwarder costs
~54 µs of CPU per request under uvicorn (uvloop, httptools) and ~29 µs on an asyncio
Protocol with httptools; the coordinator's whole hot path cost ~160 µs under uvicorn,
so ~25 µs of it were the ASGI server's own. Here httptools parses each request and
`POST /v1/invoke` is answered by `fastpath.answer_invoke` in one `transport.write`
(`edge_connection`); every other request goes to the app (FastAPI, the dashboard's
static files) through the minimal ASGI adapter of `edge_asgi`.

Per connection: keep-alive (HTTP/1.0 only when asked), pipelined requests answered in
order one at a time, chunked request bodies, `Expect: 100-continue`, 400 and close for
what httptools cannot parse (Content-Length beside Transfer-Encoding included: llhttp
refuses it, the request smuggling defence), 431 for a head that outgrows any allowed
one, 414 for a target over 8 KiB, 400 for HTTP/1.1 without exactly one Host, 505 for
other HTTP versions, 413 as the invoke body passes the limit (then a lingering close,
so the client reads it), an ignored `Upgrade` whose body is still read (the JDK's h2c
on a POST), a header-read and an idle timeout, and no reading while the client does
not read its answers. The server runs the app's
lifespan around serving and shuts down gracefully: it stops accepting, lets requests
in flight finish within a grace period and closes idle connections.

With an `ssl.SSLContext` (a coordinator's comes from `AR_TLS_CERT`, `identity/tls.py`)
the same port speaks HTTPS: asyncio's TLS transport under the same protocol; a
verified client certificate is read once per connection and reaches the invoke fast
path and the ASGI scope (`extensions["tls"]`).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

import structlog
import uvloop

from agent_reach.config import DEFAULT_PORT
from agent_reach.invoke.service import InvokeService
from agent_reach.server.allocator import fix_mmap_threshold
from agent_reach.server.app import CoordinatorApp
from agent_reach.server.edge_asgi import ASGIApp, Lifespan, StartupFailed
from agent_reach.server.edge_connection import Faces, HttpConnection

log = structlog.get_logger("agent_reach.server")

DEFAULT_HOST = "127.0.0.1"  # loopback unless told otherwise: no proxy or TLS is assumed
KEEP_ALIVE_S = 75.0  # nginx's keepalive_timeout default
# Slowloris defence: programs send a head in one segment; Apache's mod_reqtimeout gives
# people on slow links 20 s, twice this.
HEADER_TIMEOUT_S = 10.0
GRACE_S = 30.0  # the "long" timeout class (docs/policy.md): an invoke in flight may finish
BACKLOG = 2048  # uvicorn's default listen backlog
TICK_S = 0.1  # how often expired timeouts are noticed, as uvicorn's tick
STARTUP_FAILURE = 3  # the exit status of `run` when the app does not start, as uvicorn's
_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# A client that connects and never completes the handshake holds a socket the idle
# timeouts cannot see yet (the connection starts after it): as long as a request head.
HANDSHAKE_TIMEOUT_S = HEADER_TIMEOUT_S


@dataclass(frozen=True, slots=True)
class EdgeConfig:
    """Timeouts and limits of one edge server; the defaults are the module constants."""

    keep_alive_s: float = KEEP_ALIVE_S
    header_timeout_s: float = HEADER_TIMEOUT_S
    grace_s: float = GRACE_S
    backlog: int = BACKLOG
    # The A2A and MCP faces' common posts answered without the framework (fastfaces);
    # off, every one of them goes through the ASGI app (the tests compare the two).
    fast_faces: bool = True


class EdgeServer:
    """One listening server for one app; `started` and `should_exit` work as uvicorn's
    `Server` (set `should_exit` from any thread to shut down gracefully: the loop wakes
    at once, and the drain ends as its last connection and task do)."""

    def __init__(
        self,
        app: ASGIApp,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        config: EdgeConfig = EdgeConfig(),
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """`ssl_context`: serve HTTPS with it; by default a coordinator's own (AR_TLS_*)."""
        self.app = app
        self.host = host
        self.port = port
        self.config = config
        if ssl_context is None and isinstance(app, CoordinatorApp):
            ssl_context = app.ssl_context
        self.ssl_context = ssl_context
        self.started = False
        self._should_exit = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()  # should_exit, or the drain's last connection gone
        self.force_exit = False  # a second SIGINT: stop without waiting
        self.draining = False
        self.connections: set[HttpConnection] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.lifespan = Lifespan(app)
        self.invoke: InvokeService | None = None  # the coordinator's, once it has started
        self.faces: Faces | None = None  # its faces' fast path, likewise
        self.body_limit = 0
        self.node_header = b""

    @property
    def timeouts(self) -> EdgeConfig:
        return self.config

    @property
    def should_exit(self) -> bool:
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._should_exit = value
        if value:
            self._wake_soon()

    def forget(self, connection: HttpConnection) -> None:
        """A connection has closed; the drain may be over."""
        self.connections.discard(connection)
        if self.draining and not self.connections:
            self._wake_soon()

    def task_done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if self.draining and not self.tasks:
            self._wake_soon()

    def _wake_soon(self) -> None:
        """Wake `serve` from any thread (or a signal handler)."""
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop has closed: nothing to wake
            loop.call_soon_threadsafe(self._wake.set)

    async def _tick(self) -> None:
        """Until the next tick, or sooner if woken."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), TICK_S)
        self._wake.clear()

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        """Run the app's startup, serve on `sockets` (else host:port) until
        `should_exit`, then shut down; `StartupFailed` when the app does not start."""
        loop = self._loop = asyncio.get_running_loop()
        listeners: list[asyncio.Server] = []
        with self._handle_signals():
            await self.lifespan.startup()
            app = self.app
            if isinstance(app, CoordinatorApp) and app.runtime is not None:
                self.invoke, self.body_limit = app.runtime.invoke, app.settings.max_body_bytes
                self.node_header = b"x-reach-node: %s\r\n" % app.runtime.node_id.encode()
                if self.config.fast_faces:
                    # imports the MCP SDK
                    from agent_reach.server.fastfaces.exchange import faces_of

                    self.faces = faces_of(app)
            try:
                tls: dict[str, Any] = {}
                if self.ssl_context is not None:
                    tls = {"ssl": self.ssl_context, "ssl_handshake_timeout": HANDSHAKE_TIMEOUT_S}

                def accept() -> HttpConnection:
                    return HttpConnection(self, loop)

                backlog = self.config.backlog
                if sockets is None:
                    listeners.append(
                        await loop.create_server(
                            accept, self.host, self.port, backlog=backlog, **tls
                        )
                    )
                for sock in sockets or ():
                    listeners.append(
                        await loop.create_server(accept, sock=sock, backlog=backlog, **tls)
                    )
                self.started = True
                host, port = listeners[0].sockets[0].getsockname()[:2]
                scheme = "http" if self.ssl_context is None else "https"
                log.info("server_started", url=f"{scheme}://{host}:{port}")
                while not self.should_exit:
                    await self._tick()
                    self._expire(loop.time())
            finally:
                await self._drain(loop, listeners)
                await self.lifespan.shutdown()

    def _expire(self, now: float) -> None:
        for connection in list(self.connections):
            if connection.expired(now):
                connection.transport.close()

    async def _drain(
        self, loop: asyncio.AbstractEventLoop, listeners: list[asyncio.Server]
    ) -> None:
        """Stop accepting, close idle connections, let the rest finish within the grace."""
        for listener in listeners:
            listener.close()
        self.draining = True
        for connection in list(self.connections):
            connection.shutdown()
        deadline = loop.time() + self.config.grace_s
        while (self.connections or self.tasks) and not self.force_exit:
            if loop.time() > deadline:
                log.warning("shutdown_grace_expired", connections=len(self.connections))
                break
            await self._tick()
        for connection in list(self.connections):
            connection.transport.close()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    @contextlib.contextmanager
    def _handle_signals(self) -> Iterator[None]:
        """SIGINT and SIGTERM shut down gracefully (a second SIGINT at once); only the
        main thread receives signals."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self._on_signal) for sig in _SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        self.should_exit = True


async def serve(
    app: ASGIApp,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    sock: socket.socket | None = None,
    config: EdgeConfig = EdgeConfig(),
) -> None:
    """Serve `app` on host:port, or on the listening `sock`, until SIGINT or SIGTERM
    (main thread only); `StartupFailed` when its lifespan startup fails. Fixes glibc's
    mmap threshold first, so big answers leave no memory behind (allocator.py)."""
    fix_mmap_threshold()
    await EdgeServer(app, host, port, config).serve(None if sock is None else [sock])


def run(
    app: ASGIApp,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    sock: socket.socket | None = None,
) -> None:
    """`serve` on uvloop (blocking); exits with status 3 when the app does not start."""
    try:
        uvloop.run(serve(app, host, port, sock=sock))
    except StartupFailed as exc:
        log.error("startup_failed", error=str(exc))
        raise SystemExit(STARTUP_FAILURE) from None
