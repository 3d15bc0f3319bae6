"""A private `redis-server` that tests can stop, restart and freeze to fail Redis on purpose."""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from agent_reach.clock import SYSTEM_CLOCK
from agent_reach.testing.ports import PortTaken, on_free_ports, port_was_taken
from agent_reach.testing.processes import ChildProcess

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
PROBE_TIMEOUT_S = 0.3  # a local Redis answers PING in well under a millisecond
START_TIMEOUT_S = 10.0  # redis-server with no data to load is ready in tens of milliseconds
STOP_GRACE_S = 5.0  # after SIGTERM, then SIGKILL
_PROCESS_ID = re.compile(rb"\r\nprocess_id:(\d+)\r\n")


def answers_ping(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """True when a Redis on host:port answers PING within `timeout_s`."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def answers_as(pid: int, host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """True when the Redis on host:port answers within `timeout_s` and is process `pid`."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(b"INFO server\r\n")
            reply = b""
            while (found := _PROCESS_ID.search(reply)) is None:
                chunk = sock.recv(4096)
                if not chunk:
                    return False
                reply += chunk
            return int(found[1]) == pid
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
        self._port_chosen = port is None  # picked at its first start (a restart keeps it)
        self.port = port or 0
        self.options = options  # more redis-server flags, e.g. a cluster node's
        self.directory = Path(tempfile.mkdtemp(prefix="agent-reach-redis-"))

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        """Start the server and return once it answers; `RuntimeError` if it does not.
        A port it chose itself is picked at its first start, and picked again when
        another process binds it first; a restart stays on its port."""
        if self.is_running:
            return self
        if self._port_chosen:
            on_free_ports(self._start_on)
            self._port_chosen = False  # up: from now on its port is its address
            return self
        return self._start_on(self.port)

    def _start_on(self, port: int) -> RedisServer:
        self.port = port
        log_file = self.directory / "redis.log"
        log_file.unlink(missing_ok=True)  # an earlier run's, or an attempt's on a taken port
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
        # Our process, not a Redis of another process that took the port meanwhile.
        while not (self.pid and answers_as(self.pid, "127.0.0.1", self.port)):
            if not self.is_running or SYSTEM_CLOCK.monotonic() > deadline:
                self.stop()
                log = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
                if self._port_chosen and port_was_taken(log):
                    raise PortTaken(f"redis-server: port {self.port} taken:\n{log}")
                raise RuntimeError(f"redis-server did not come up on port {self.port}:\n{log}")
            time.sleep(0.01)
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
