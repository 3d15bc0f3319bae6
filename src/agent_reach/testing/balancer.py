"""A real nginx in front of several coordinators, running the deployment's own config.

`NginxBalancer` copies the given ``nginx.conf`` (deploy/nginx/nginx.conf) unchanged into
a directory of its own and writes the two files it includes: the upstream, one loopback
coordinator per line, and the listen address, a free port on 127.0.0.1 (another one when
another process takes it before nginx binds it).

`wait_bound` tells when an nginx has bound its ports, for any nginx the tests run.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

from agent_reach.clock import SYSTEM_CLOCK
from agent_reach.testing.ports import PortTaken, on_free_ports, port_was_taken
from agent_reach.testing.processes import ChildProcess

UPSTREAM_FILE = "agent-reach-upstream.conf"
LISTEN_FILE = "agent-reach-listen.conf"
# As in deploy/nginx/agent-reach-upstream.conf: one failure takes a coordinator out for 2 s.
SERVER_OPTIONS = "max_fails=1 fail_timeout=2s"
KEEPALIVE = 32
START_TIMEOUT_S = 10.0


class NginxBalancer(ChildProcess):
    """nginx on 127.0.0.1:`port`, balancing over `upstreams` (``host:port`` each)."""

    def __init__(self, config: Path, upstreams: Sequence[str], binary: str = "nginx") -> None:
        found = shutil.which(binary) or shutil.which(binary, path="/usr/sbin:/usr/local/sbin")
        if found is None:
            raise FileNotFoundError(f"{binary!r} not found: install nginx (apt-get install nginx)")
        super().__init__()
        self.binary = found
        self.config = config
        self.upstreams = list(upstreams)
        self.port = 0  # picked at start
        self.directory = Path(tempfile.mkdtemp(prefix="agent-reach-nginx-"))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> NginxBalancer:
        """Write the config, start nginx on a free port, return once it listens."""
        return on_free_ports(self._start_on)

    def _start_on(self, port: int) -> NginxBalancer:
        self.port = port
        for name in ("nginx.pid", "nginx.log", "error.log"):  # an earlier attempt's
            (self.directory / name).unlink(missing_ok=True)
        shutil.copyfile(self.config, self.directory / "nginx.conf")
        servers = "".join(f"    server {u} {SERVER_OPTIONS};\n" for u in self.upstreams)
        upstream = f"upstream coordinators {{\n{servers}    keepalive {KEEPALIVE};\n}}\n"
        (self.directory / UPSTREAM_FILE).write_text(upstream, encoding="utf-8")
        (self.directory / LISTEN_FILE).write_text(
            f"listen 127.0.0.1:{self.port};\n", encoding="utf-8"
        )
        command = [
            self.binary,
            "-p", str(self.directory),
            "-c", str(self.directory / "nginx.conf"),
            "-e", str(self.directory / "error.log"),
            "-g", "daemon off;",
        ]  # fmt: skip
        with (self.directory / "nginx.log").open("ab") as log:
            self.spawn(command, output=log)
        try:
            wait_bound(self.directory, lambda: self.is_running, self.log)
        except RuntimeError:
            self.stop()
            raise
        return self

    def log(self) -> str:
        """nginx's own output so far (errors, upstream failures)."""
        parts = [self.directory / name for name in ("nginx.log", "error.log")]
        return "".join(p.read_text(errors="replace") for p in parts if p.exists())[-4000:]

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> NginxBalancer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def wait_bound(directory: Path, is_running: Callable[[], bool], log: Callable[[], str]) -> None:
    """Return once the nginx run from `directory` (``pid nginx.pid`` there) has bound its
    ports: it writes its pid file only then. `PortTaken` when its log says a port was
    taken (a port that answers meanwhile may be the other process's); `RuntimeError`
    when it exits or takes longer than `START_TIMEOUT_S`."""
    pid_file = directory / "nginx.pid"
    deadline = SYSTEM_CLOCK.monotonic() + START_TIMEOUT_S
    while not pid_file.exists():
        if not is_running() or SYSTEM_CLOCK.monotonic() > deadline:
            if port_was_taken(log()):
                raise PortTaken(f"nginx could not bind its port:\n{log()}")
            raise RuntimeError(f"nginx did not come up:\n{log()}")
        time.sleep(0.02)
