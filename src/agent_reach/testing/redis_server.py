"""A private `redis-server` that tests can stop, restart and freeze to fail Redis on purpose."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from agent_reach.clock import SYSTEM_CLOCK
from agent_reach.testing.processes import ChildProcess

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
PROBE_TIMEOUT_S = 0.3  # a local Redis answers PING in well under a millisecond
START_TIMEOUT_S = 10.0  # redis-server with no data to load is ready in tens of milliseconds
STOP_GRACE_S = 5.0  # after SIGTERM, then SIGKILL
PORT_RETRIES = 3  # new ports tried when another process took the one picked


def answers_ping(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """True when a Redis on host:port answers PING within `timeout_s`."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def find_redis_url() -> str | None:
    """`AR_TEST_REDIS_URL` when set, else the default local Redis if it answers, else None."""
    configured = os.environ.get("AR_TEST_REDIS_URL")
    if configured:
        return configured
    parts = urlsplit(DEFAULT_REDIS_URL)
    if parts.hostname and parts.port and answers_ping(parts.hostname, parts.port):
        return DEFAULT_REDIS_URL
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now.

    Another process may take it before ours binds it: a server started on it retries
    on another port when its bind fails (`RedisServer`, the test kit's processes).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def refused_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections for as long as this is held: bound
    by this process, never listened on, so no other process can take it meanwhile."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def port_was_taken(log: str) -> bool:
    """True when a server's log says its bind failed because the port is in use."""
    return "address already in use" in log.lower()


class RedisServer(ChildProcess):
    """A throwaway `redis-server` on 127.0.0.1: no persistence, its own directory and port.

    `stop` then `start` brings it back on the same port, empty; `pause` freezes the
    process (SIGSTOP) so clients see timeouts rather than refused connections.
    Usable as a context manager, which starts it and removes it afterwards.
    """

    def __init__(
        self,
        binary: str = "redis-server",
        *,
        port: int | None = None,
        options: tuple[str, ...] = (),
    ) -> None:
        found = shutil.which(binary)
        if found is None:
            raise FileNotFoundError(
                f"{binary!r} not found: install Redis (apt-get install redis-server)"
            )
        super().__init__()
        self.binary = found
        self._port_chosen = port is None  # ours to change until first up (a restart keeps it)
        self.port = free_port() if port is None else port
        self.options = options  # more redis-server flags, e.g. a cluster node's
        self.directory = Path(tempfile.mkdtemp(prefix="agent-reach-redis-"))

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, retries: int = PORT_RETRIES) -> RedisServer:
        """Start the server and return once it answers PING; `RuntimeError` if it does not.
        On a port it chose, taken meanwhile by another process, the first start tries
        another; a restart stays on its port."""
        if self.is_running:
            return self
        log_file = self.directory / "redis.log"
        command = [
            self.binary,
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.directory),
            "--logfile", str(log_file),
            *self.options,
        ]  # fmt: skip
        self.spawn(command)
        deadline = SYSTEM_CLOCK.monotonic() + START_TIMEOUT_S
        while not answers_ping("127.0.0.1", self.port):
            if not self.is_running or SYSTEM_CLOCK.monotonic() > deadline:
                self.stop()
                log = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
                if self._port_chosen and port_was_taken(log) and retries > 0:
                    log_file.unlink()
                    self.port = free_port()
                    return self.start(retries - 1)
                raise RuntimeError(f"redis-server did not come up on port {self.port}:\n{log}")
            time.sleep(0.01)
        self._port_chosen = False
        return self

    def close(self) -> None:
        """Stop the server and delete its directory."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
