"""Run ASGI apps on 127.0.0.1 in a background thread, for tests and the demo."""

from __future__ import annotations

import asyncio
import io
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog
import uvicorn
import uvloop

from agent_reach.clock import SYSTEM_CLOCK, Clock
from agent_reach.config import Settings
from agent_reach.server.app import CoordinatorApp, create_app
from agent_reach.server.edge import EdgeConfig, EdgeServer
from agent_reach.server.edge_asgi import StartupFailed

STARTUP_TIMEOUT_S = 15.0
SLOW_STOP_S = 3.0  # a server still stopping after this logs what its loop is waiting on

log = structlog.get_logger("agent_reach.testing")


class ServerThread:
    """One server on its own thread and uvloop event loop: a coordinator (or any app
    given an `edge` config) on the edge server, every other app on uvicorn (httptools).

    HTTPS with `ssl_context` (a coordinator serves its own AR_TLS_* without it).
    """

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        edge: EdgeConfig | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.app = app
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(2048)  # accept from now on: an agent may be called during its startup
        self.host, self.port = self.sock.getsockname()[:2]
        self.server: EdgeServer | uvicorn.Server
        if edge is not None or isinstance(app, CoordinatorApp):
            self.server = EdgeServer(app, self.host, self.port, edge or EdgeConfig(), ssl_context)
            ssl_context = self.server.ssl_context
        else:
            config = uvicorn.Config(
                app,
                loop="uvloop",
                http="httptools",
                lifespan="on",
                log_level="warning",
                access_log=False,
            )
            if ssl_context is not None:
                config.load()
                config.ssl = ssl_context
            self.server = uvicorn.Server(config)
        self.url = f"{'http' if ssl_context is None else 'https'}://{self.host}:{self.port}"
        self.thread = threading.Thread(target=self._run, name=f"server-{self.port}", daemon=True)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.error: StartupFailed | None = None

    def _run(self) -> None:
        try:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                runner.run(self._serve())
        except StartupFailed as exc:  # start() raises it
            self.error = exc

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        await self.server.serve(sockets=[self.sock])

    def start(self) -> ServerThread:
        """Start serving; returns once the app's startup has finished."""
        self.thread.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"server on {self.url} did not start: {self.error}") from (
                    self.error
                )
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Graceful shutdown (lifespan shutdown runs); waits for the thread to end."""
        self.server.should_exit = True
        self.thread.join(SLOW_STOP_S)
        if self.thread.is_alive():
            log.warning("server_slow_to_stop", url=self.url, waiting_on=self._pending())
            self.thread.join(STARTUP_TIMEOUT_S - SLOW_STOP_S)
        self.sock.close()

    def _pending(self) -> str:
        """The stacks of the tasks the server's loop still runs (read from another thread:
        a diagnosis, not a synchronised view)."""
        out = io.StringIO()
        loop = self.loop
        if loop is not None:
            for task in list(asyncio.all_tasks(loop)):
                print(task.get_name(), "cancelling" if task.cancelling() else "", file=out)
                for where in _awaiting(task.get_coro()):
                    print("   ", where, file=out)
        return out.getvalue()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _awaiting(awaitable: object) -> Iterator[str]:
    """Where a coroutine stands, outermost first, following what each frame awaits."""
    while awaitable is not None:
        frame = getattr(awaitable, "cr_frame", None) or getattr(awaitable, "ag_frame", None)
        if frame is None:
            yield repr(awaitable)[:200]
            return
        yield f"{frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}"
        awaitable = getattr(awaitable, "cr_await", None) or getattr(awaitable, "ag_await", None)


def stop_all(servers: list[ServerThread]) -> None:
    """Stop servers together: each shutdown waits for its loop's next tick (uvicorn's is
    0.1 s), so asking them all first makes a test's teardown one tick, not one each."""
    for server in servers:
        server.server.should_exit = True
    for server in servers:
        server.stop()


@contextmanager
def run_coordinator(
    settings: Settings | None = None, clock: Clock = SYSTEM_CLOCK
) -> Iterator[tuple[str, CoordinatorApp]]:
    """A real coordinator on an ephemeral loopback port: yields its URL and app."""
    app = create_app(settings or Settings(), clock)
    with ServerThread(app) as server:
        yield server.url, app
