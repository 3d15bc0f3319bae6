"""`agent-reach serve` as a child process on a port the kernel picks.

`ServeProcess` starts ``python -m agent_reach serve --host 127.0.0.1 --port 0`` (or on a
given port, for `--workers`, whose workers each bind the port themselves), reads the
address it listens on from its ``server_started`` log line, and keeps everything it
writes on stdout and stderr for the test to inspect, read by threads so the child never
blocks on a full pipe.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import IO, Self
from urllib.parse import urlsplit

from agent_reach.testing.ports import PortTaken, port_was_taken

START_TIMEOUT_S = 60.0  # cold interpreters importing the coordinator on a busy 2-core machine
STOP_TIMEOUT_S = 60.0  # graceful shutdown (SIGTERM) before SIGKILL
PYTHON_M = (sys.executable, "-m", "agent_reach")
_URL = re.compile(r"https?://[^\s\"',]+")


class ServeProcess:
    """`serve ARGS` with `env` as its whole environment (default: this process's),
    at log level info so it logs where it listens.

    `start` returns once it has; `url` is that address, `stdout` and `stderr` (its log)
    what it wrote so far, `stop` shuts it down (SIGTERM) and returns its exit status.
    A port given instead of 0 that another process took makes `start` raise `PortTaken`
    (see `on_free_ports`).
    """

    def __init__(
        self,
        *args: str,
        port: int = 0,
        env: Mapping[str, str] | None = None,
        command: Sequence[str] = PYTHON_M,
    ) -> None:
        self.command = [*command, "serve", "--host", "127.0.0.1", "--port", str(port), *args]
        self.port = port
        self.env = {**(env if env is not None else os.environ), "AR_LOG_LEVEL": "info"}
        self.url = ""
        self._out: list[str] = []
        self._err: list[str] = []
        self._started = threading.Event()  # the server listens, or its log ended
        self._process: subprocess.Popen[str] | None = None
        self._readers: list[threading.Thread] = []

    @property
    def stdout(self) -> str:
        return "".join(self._out)

    @property
    def stderr(self) -> str:
        """Its log (and any other error output) so far."""
        return "".join(self._err)

    def start(self, timeout_s: float = START_TIMEOUT_S) -> Self:
        """Start it; return once it listens. `RuntimeError` with its output when it exits
        or stays silent for `timeout_s`; `PortTaken` when the port it was given is taken."""
        self._process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
            self.command,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
        pipes = ((self._process.stdout, self._out), (self._process.stderr, self._err))
        self._readers = [
            threading.Thread(target=self._read, args=(pipe, lines), daemon=True)
            for pipe, lines in pipes
        ]
        for reader in self._readers:
            reader.start()
        self._started.wait(timeout_s)
        if not self.url:
            self.stop()
            output = self.stderr + self.stdout
            if self.port and port_was_taken(output):
                raise PortTaken(f"port {self.port} is taken:\n{output[-2000:]}")
            raise RuntimeError(f"`agent-reach serve` did not start:\n{output[-4000:]}")
        return self

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, SIGKILL after `timeout_s`; the exit status (negative: the signal)."""
        process = self._process
        if process is None:
            raise RuntimeError("not started")
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
        status = process.wait()
        for reader in self._readers:
            reader.join()  # the pipes are closed: every line is in `stdout` and `stderr`
        return status

    def _read(self, pipe: IO[str], lines: list[str]) -> None:
        for line in pipe:
            lines.append(line)
            if not self.url and (url := listening_url(line)):
                self.url = url
                self.port = urlsplit(url).port or 0
                self._started.set()
        if lines is self._err:
            self._started.set()  # its log ended: it exited without listening

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._process is not None:
            self.stop()


def listening_url(line: str) -> str | None:
    """The address in a coordinator's ``server_started`` log line, None for other lines."""
    found = _URL.search(line) if "server_started" in line else None
    return found[0] if found else None
