"""Real agent and coordinator processes for fault tests: kill, freeze and restart them.

    python -m agent_reach.testing.agent_process --port P --id ID --capability CAP \
        --coordinator URL [--ttl S] [--latency-ms A-B] [--ledger PATH] [--forward-to CAP] \
        [--not-idempotent]

runs an SDK `Agent` (so it registers, heartbeats and guards its handler by
request_id) whose handler writes one row per side effect to a SQLite ledger before
answering. A delivery answered from the SDK's guard instead of the handler is
recorded as a `dedup_hit`. The ledger is a file per agent that outlives the process,
so duplicate executions are counted across kills and restarts. With `--forward-to`
the handler also calls another capability through `request.client` (ping-pong).

`AgentProcess` and `CoordinatorProcess` start such processes (and
`python -m agent_reach serve`, on port 0: it logs the port it got) on 127.0.0.1 and
SIGKILL, SIGSTOP, SIGCONT or restart them on that same port.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import os
import random
import sqlite3
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Self

import orjson

from agent_reach.clock import SYSTEM_CLOCK
from agent_reach.observability.logging import configure_logging
from agent_reach.sdk.agent import Agent, AgentRequest
from agent_reach.testing.ports import (
    PORT_RETRIES,
    PortTaken,
    free_port,
    on_free_ports,
    port_was_taken,
)
from agent_reach.testing.processes import ChildProcess
from agent_reach.testing.serve_process import listening_url
from agent_reach.testing.waiting import wait_until

START_TIMEOUT_S = 20.0  # a cold interpreter importing the stack takes ~1 s; CI may be 10x slower
STOP_GRACE_S = 5.0  # after SIGTERM (graceful: the agent deregisters), then SIGKILL
READY_PROBE_TIMEOUT_S = 0.5
HEALTH_MARK_EVENTS = (
    "instance_marked_healthy",
    "instance_marked_suspect",
    "instance_marked_offline",
)

Kind = Literal["executed", "dedup_hit"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger (
    request_id  TEXT NOT NULL,
    agent_id    TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    trace_id    TEXT,
    executed_at REAL NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('executed', 'dedup_hit'))
)
"""


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """One side effect (`executed`) or one delivery answered without running the handler."""

    request_id: str
    agent_id: str
    pid: int
    trace_id: str | None
    executed_at: float
    kind: Kind


class Ledger:
    """The agent's side-effect ledger: SQLite in WAL mode, every row fsynced before it counts.

    Writes go through one worker thread, so the event loop never blocks on fsync.
    """

    def __init__(self, path: Path, agent_id: str) -> None:
        self.agent_id = agent_id
        self.pid = os.getpid()
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(_SCHEMA)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger")

    async def record(self, request_id: str, kind: Kind, trace_id: str | None = None) -> None:
        """Append one row; returns once it is on disk."""
        row = (request_id, self.agent_id, self.pid, trace_id, SYSTEM_CLOCK.wall(), kind)
        await asyncio.get_running_loop().run_in_executor(self._writer, self._insert, row)

    def _insert(self, row: tuple[Any, ...]) -> None:
        self._db.execute("INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?)", row)


def read_ledger(path: Path) -> list[LedgerRow]:
    """Every row of one ledger file (none when the agent never wrote one)."""
    if not path.exists():
        return []
    with contextlib.closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT * FROM ledger ORDER BY executed_at").fetchall()
    return [LedgerRow(*row) for row in rows]


@dataclass(slots=True)
class _Delivery:
    handled: bool = False


_delivery: ContextVar[_Delivery | None] = ContextVar("delivery", default=None)


class _LedgerMiddleware:
    """Records a `dedup_hit` for a 2xx delivery whose handler did not run (the SDK's guard).

    The handler marks the delivery through a context variable; the SDK runs it in a
    task created inside this request, which inherits the variable.
    """

    def __init__(self, app: Any, ledger: Ledger) -> None:
        self.app = app
        self.ledger = ledger

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        delivery = _Delivery()
        headers = dict(scope["headers"])
        request_id = headers.get(b"x-request-id", b"").decode("latin-1")

        async def send_after_recording(message: dict[str, Any]) -> None:
            if (
                message["type"] == "http.response.start"
                and 200 <= message["status"] < 300
                and not delivery.handled
            ):
                await self.ledger.record(request_id, "dedup_hit")
            await send(message)

        token = _delivery.set(delivery)
        try:
            await self.app(scope, receive, send_after_recording)
        finally:
            _delivery.reset(token)


def build_agent(options: argparse.Namespace) -> Agent:
    """The SDK agent the command line describes, its app wrapped with the ledger."""
    low_ms, high_ms = options.latency_ms
    agent = Agent(
        options.id,
        options.capability,
        coordinator_url=options.coordinator,
        endpoint_url=options.endpoint,
        ttl=options.ttl,
        timeout_class=options.timeout_class,
        min_instances=options.min_instances,
        idempotent=not options.not_idempotent,
    )
    ledger = Ledger(options.ledger, options.id)

    @agent.handler
    async def act(request: AgentRequest) -> dict[str, Any]:
        delivery = _delivery.get()
        if delivery is not None:
            delivery.handled = True
        if high_ms > 0:
            await asyncio.sleep(random.uniform(low_ms, high_ms) / 1000)
        await ledger.record(request.request_id, "executed", request.trace_id)
        result: dict[str, Any] = {"agent_id": options.id, "request_id": request.request_id}
        if options.forward_to:
            forwarded = await request.client.invoke(options.forward_to, payload=request.payload)
            result["forwarded_to"] = forwarded.agent_id
        return result

    agent.app = _LedgerMiddleware(agent.app, ledger)  # type: ignore[assignment]
    return agent


def _latency(text: str) -> tuple[float, float]:
    low, _, high = text.partition("-")
    bounds = (float(low), float(high or low))
    if not 0 <= bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError(f"latency must be A-B milliseconds with A <= B: {text!r}")
    return bounds


def parse_options(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m agent_reach.testing.agent_process",
        description="An SDK agent with a SQLite side-effect ledger, for fault tests.",
    )
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--id", required=True)
    parser.add_argument("--capability", action="append", required=True, help="repeatable")
    parser.add_argument("--coordinator", required=True, help="coordinator base URL")
    parser.add_argument("--ttl", type=float, default=5.0, help="lease seconds (heartbeat ttl/3)")
    parser.add_argument("--latency-ms", type=_latency, default=(0.0, 0.0), help="A-B, uniform")
    parser.add_argument("--ledger", type=Path, help="SQLite file (default: ./<id>.ledger.db)")
    parser.add_argument("--forward-to", help="capability the handler calls next (ping-pong)")
    parser.add_argument("--endpoint", help="URL to register instead of our own (a proxy)")
    parser.add_argument("--timeout-class", default="query")
    parser.add_argument("--min-instances", type=int, default=0, help="healthy instances wanted")
    parser.add_argument(
        "--not-idempotent", action="store_true", help="register without declaring idempotent"
    )
    options = parser.parse_args(argv)
    if options.ledger is None:
        options.ledger = Path(f"{options.id}.ledger.db")
    return options


def main(argv: Sequence[str] | None = None) -> None:
    options = parse_options(argv)
    # JSON lines: structlog's default console renderer draws rich tracebacks with locals,
    # which blocks the loop for hundreds of milliseconds on every failed handler.
    configure_logging("warning", json=True)
    build_agent(options).serve(host="127.0.0.1", port=options.port, log_level="warning")


class ManagedProcess(ChildProcess):
    """One child process serving HTTP on a fixed 127.0.0.1 port, driven by signals.

    `start` returns once `ready_path` answers 2xx; `restart` brings it back on the
    same port. Output goes to `log_path` (appended across restarts). A port picked
    for it (`port_chosen`) that another process took before it bound it is replaced
    by a new one at its first start (its `--port` argument); a restart keeps its port.
    Port 0 is for a coordinator: its first start takes the port it logs.
    """

    def __init__(
        self,
        name: str,
        command: list[str],
        *,
        port: int,
        ready_path: str,
        log_path: Path,
        env: dict[str, str] | None = None,
        port_chosen: bool = False,
    ) -> None:
        super().__init__()
        self.name = name
        self.command = command
        self.port = port
        self._port_chosen = port_chosen
        self._log_start = 0  # where this launch's output begins in the log
        self.ready_path = ready_path
        self.log_path = log_path
        self.env = env

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def launch(self) -> Self:
        """Spawn the process without waiting for it (start several, then `wait_ready`)."""
        if not self.is_running:
            with self.log_path.open("ab") as log:
                self._log_start = log.tell()
                self.spawn(self.command, output=log, env=self.env)
        return self

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> Self:
        """Block until the ready path answers 2xx; fails with the log's tail if it exits."""
        try:
            self._wait_ready(timeout_s)
        except PortTaken:  # raised only for a port picked for it, at its first start
            on_free_ports(lambda port: self._relaunch_on(port, timeout_s), retries=PORT_RETRIES - 1)
        self._port_chosen = False  # up: from now on its port is its address
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        wait_until(self._answers, f"{self.name} on port {self.port} to be ready", timeout_s)

    def _relaunch_on(self, port: int, timeout_s: float) -> None:
        self._move_to(port)
        self.launch()
        self._wait_ready(timeout_s)

    def start(self) -> Self:
        return self.launch().wait_ready()

    def restart(self) -> Self:
        """Kill if running, then start again on the same port."""
        self.kill()
        return self.start()

    def log_tail(self, chars: int = 3000) -> str:
        if not self.log_path.exists():
            return ""
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-chars:]

    def _move_to(self, port: int) -> None:
        self.command[self.command.index("--port") + 1] = str(port)
        self.name = self.name.replace(f":{self.port}", f":{port}")
        self.port = port

    def _output(self) -> str:
        """What this launch wrote so far."""
        with self.log_path.open("rb") as log:
            log.seek(self._log_start)
            return log.read().decode(errors="replace")

    def _answers(self) -> bool:
        if self._process is None or self._process.poll() is not None:
            output = self._output()
            if self._port_chosen and port_was_taken(output):
                raise PortTaken(f"{self.name}: port {self.port} taken:\n{output[-500:]}")
            raise RuntimeError(f"{self.name} exited during startup:\n{self.log_tail()}")
        if self.port == 0:  # not listening until it logs where
            urls = map(listening_url, self._output().splitlines())
            url = next(filter(None, urls), None)
            if url is None:
                return False
            self._move_to(int(url.rsplit(":", 1)[1]))
        connection = http.client.HTTPConnection(
            "127.0.0.1", self.port, timeout=READY_PROBE_TIMEOUT_S
        )
        try:
            connection.request("GET", self.ready_path)
            return 200 <= connection.getresponse().status < 300
        except OSError:
            return False
        finally:
            connection.close()


class AgentProcess(ManagedProcess):
    """`python -m agent_reach.testing.agent_process` with its own ledger file in `directory`."""

    def __init__(
        self,
        agent_id: str,
        capability: str,
        coordinator_url: str,
        *,
        directory: Path,
        port: int | None = None,
        ttl_s: float = 5.0,
        latency_ms: tuple[float, float] = (0.0, 0.0),
        forward_to: str | None = None,
        endpoint: str | None = None,
        timeout_class: str = "query",
        min_instances: int = 0,
        idempotent: bool = True,
    ) -> None:
        self.agent_id = agent_id
        self.ledger_path = directory / f"{agent_id}.ledger.db"
        port_chosen, port = port is None, port or free_port()
        command = [
            sys.executable, "-m", "agent_reach.testing.agent_process",
            "--port", str(port),
            "--id", agent_id,
            "--capability", capability,
            "--coordinator", coordinator_url,
            "--ttl", str(ttl_s),
            "--latency-ms", f"{latency_ms[0]}-{latency_ms[1]}",
            "--ledger", str(self.ledger_path),
            "--timeout-class", timeout_class,
            "--min-instances", str(min_instances),
        ]  # fmt: skip
        if forward_to:
            command += ["--forward-to", forward_to]
        if endpoint:
            command += ["--endpoint", endpoint]
        if not idempotent:
            command.append("--not-idempotent")
        super().__init__(
            agent_id,
            command,
            port=port,
            ready_path="/health",
            log_path=directory / f"{agent_id}.log",
            port_chosen=port_chosen,
        )

    def ledger(self) -> list[LedgerRow]:
        return read_ledger(self.ledger_path)


@dataclass(frozen=True, slots=True)
class HealthMark:
    """A health transition a coordinator logged: when, which instance, the new state, why
    (`probe` or `delivery`), and the consecutive failures counted at that moment."""

    t: float
    agent_id: str
    state: str
    source: str
    failures: int


class CoordinatorProcess(ManagedProcess):
    """`python -m agent_reach serve` on 127.0.0.1, JSON logs kept in `directory`."""

    def __init__(
        self,
        *,
        directory: Path,
        port: int | None = None,
        backend: str = "memory",
        redis_url: str | None = None,
        redis_prefix: str | None = None,
        policy_file: Path | None = None,
        probe_interval_s: float | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        port = port or 0
        settings = {
            "AR_REGISTRY_BACKEND": backend,
            "AR_DECISION_LOG": "off",
            "AR_LOG_JSON": "1",
            "AR_LOG_LEVEL": "info",  # the level of `server_started`, which says its port
        }
        optional = {
            "AR_REDIS_URL": redis_url,
            "AR_REDIS_PREFIX": redis_prefix,
            "AR_POLICY_FILE": str(policy_file) if policy_file else None,
            "AR_PROBE_INTERVAL_S": str(probe_interval_s) if probe_interval_s else None,
        }
        settings.update({k: v for k, v in optional.items() if v is not None})
        settings.update(extra_env or {})
        command = [sys.executable, "-m", "agent_reach", "serve", "--host", "127.0.0.1"]
        command += ["--port", str(port)]
        handle, log_path = tempfile.mkstemp(prefix="coordinator-", suffix=".log", dir=directory)
        os.close(handle)
        super().__init__(
            f"coordinator:{port}",
            command,
            port=port,
            ready_path="/healthz",
            log_path=Path(log_path),
            env={**os.environ, **settings},  # inherited AR_* (AR_AUTH of tests...) under ours
        )

    def events(self, *names: str) -> list[dict[str, Any]]:
        """The structured log records (JSON lines) so far, only `names` when given."""
        if not self.log_path.exists():
            return []
        records = []
        for line in self.log_path.read_bytes().splitlines():
            if not line.startswith(b"{"):
                continue  # uvicorn's own plain-text lines
            with contextlib.suppress(orjson.JSONDecodeError):
                record = orjson.loads(line)
                if not names or record.get("event") in names:
                    records.append(record)
        return records

    def health_marks(self) -> list[HealthMark]:
        """Every health transition this coordinator logged, oldest first."""
        return [
            HealthMark(
                datetime.fromisoformat(record["timestamp"]).timestamp(),
                record["agent_id"],
                record["event"].removeprefix("instance_marked_"),
                record.get("source", ""),
                record.get("failures", 0),
            )
            for record in self.events(*HEALTH_MARK_EVENTS)
        ]


if __name__ == "__main__":
    main()
