"""What the hot path's record-keeping and its delivery I/O cost: each switched off in turn,
in process.

    .venv/bin/python bench/recording.py [--rounds 30] [--requests 6400] [--json out.json]

Starts the echo agent (`bench/echo_agent.py`) on CPU 0 and, in this process on CPU 1, a
coordinator configured as `bench/overhead.py` deploys it (memory backend, keys, access
rules, a quota, the decision log written to a file, tracing on). Its edge server serves
the set-up calls; the measured requests call `fastpath.answer_invoke` directly, 64 at a
time, so only the coordinator's own work is timed (no client, no edge parsing).

Each round runs the requests with every recorder on, then once with each variant
switching some off: the spans kept for `/v1/traces`, the decision log, the request
journal behind `agent-reach why`, the answer memory behind degraded answers, and all
four; and two that take the delivery's socket out, answering each delivery with the echo
agent's own answer (a real one, kept from the first warm-up run) at once, or one
event-loop iteration later: what the round trip to the agent costs, in Python and in the
kernel, beyond the request's own work and beyond one suspension of it. Reported: the CPU
microseconds per request (process time, so the writer threads count) of each variant,
and the median over rounds of its difference from the round's run with everything on.
Paired rounds cancel the drift of a shared machine; single runs vary by ±10 % and more.
A variant is a measurement, never a configuration: with a recorder off the coordinator
would lose a feature it documents, and without the socket it would deliver nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

from agent_reach.cli import GC_THRESHOLDS
from agent_reach.config import Settings
from agent_reach.invoke.answer_memory import AnswerMemory
from agent_reach.invoke.service import InvokeService
from agent_reach.observability.decision_log import DecisionLog
from agent_reach.observability.logging import configure_logging
from agent_reach.observability.trace_store import TraceStore
from agent_reach.server.app import create_app
from agent_reach.server.edge import EdgeServer
from agent_reach.server.fastpath import answer_invoke
from agent_reach.testing.servers import ServerThread
from agent_reach.troubleshooting.journal import RequestJournal
from agent_reach.wire.pool import HttpPool, Response

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from overhead import BENCH_POLICY, BENCH_QUOTA, BODY, register_agent, wait_healthy  # noqa: E402

AGENT_CPU, COORDINATOR_CPU = 0, 1
IN_FLIGHT = 64  # as bench/overhead.py's top concurrency
WARMUP_RUNS = 3


def _off(self: object, *args: object, **kwargs: object) -> None:
    """A recorder that records nothing."""


_answer: list[Response] = []  # the echo agent's answer, kept by the first warm-up run


async def _answered_at_once(self: object, *args: object, **kwargs: object) -> Response:
    """A delivery that never leaves the process: the agent's answer, at once."""
    return _answer[0]


async def _answered_next_iteration(self: object, *args: object, **kwargs: object) -> Response:
    """The same, after one turn of the event loop (the request suspends once)."""
    await asyncio.sleep(0)
    return _answer[0]


Replacements = tuple[tuple[type, str, Callable[..., Any]], ...]


def _off_all(*pairs: tuple[type, str]) -> Replacements:
    return tuple((cls, name, _off) for cls, name in pairs)


# variant -> the (class, method, replacement) triples it runs with
RECORDERS: dict[str, Replacements] = {
    "spans": _off_all((TraceStore, "add")),
    "decision log": _off_all((DecisionLog, "record")),
    "journal": _off_all((RequestJournal, "record")),
    "answer memory": _off_all((AnswerMemory, "remember")),
}
VARIANTS: dict[str, Replacements] = {
    **RECORDERS,
    "all four": tuple(triple for triples in RECORDERS.values() for triple in triples),
    "socket (answered at once)": ((HttpPool, "request", _answered_at_once),),
    "socket (answered next iteration)": ((HttpPool, "request", _answered_next_iteration),),
}


@contextlib.contextmanager
def replaced(triples: Replacements) -> Iterator[None]:
    """The methods replaced for the duration."""
    saved = [(cls, name, cls.__dict__[name]) for cls, name, _ in triples]
    for cls, name, replacement in triples:
        setattr(cls, name, replacement)
    try:
        yield
    finally:
        for cls, name, method in saved:
            setattr(cls, name, method)


def _keeping_the_answer() -> Replacements:
    """HttpPool.request as it is, keeping the last answer for the socket variants."""
    request = HttpPool.request

    async def keep(self: HttpPool, *args: Any, **kwargs: Any) -> Response:
        response = await request(self, *args, **kwargs)
        _answer[:] = [response]
        return response

    return ((HttpPool, "request", keep),)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def _deployed(tmp: Path, admin: str) -> Iterator[None]:
    """The environment of `bench/overhead.py`'s coordinator, for one made in this process:
    memory backend, keys, access rules, a quota, the decision log written to a file."""
    (tmp / "policy.toml").write_text(BENCH_POLICY + BENCH_QUOTA)
    saved = dict(os.environ)
    os.environ.update(
        AR_REGISTRY_BACKEND="memory",
        AR_AUTH="on",
        AR_ADMIN_KEY=admin,
        AR_POLICY_FILE=str(tmp / "policy.toml"),
        AR_DECISION_LOG=str(tmp / "decisions.jsonl"),
    )
    configure_logging("warning", json=False)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _serving(admin: str, warmup: int) -> Iterator[Callable[[int], float]]:
    """A coordinator in this process (its loop in a thread) with the echo agent registered
    (a process on AGENT_CPU), warmed up with `WARMUP_RUNS` runs of `warmup` requests and
    set up as `agent-reach serve` runs it: `timed(n)` makes n invokes, 64 at a time, and
    returns the CPU µs per request. The first warm-up run keeps the agent's answer for
    the socket variants."""
    agent_port = free_port()
    command = [sys.executable, str(REPO / "bench" / "echo_agent.py"), "--port", str(agent_port)]
    agent = subprocess.Popen(["taskset", "-c", str(AGENT_CPU), *command])
    try:
        with ServerThread(create_app(Settings())) as server:
            assert isinstance(server.server, EdgeServer) and server.loop is not None
            wait_healthy("echo agent", agent, agent_port, "/health", Path(os.devnull))
            caller_key = register_agent(server.port, agent_port, admin)
            assert server.server.invoke is not None  # started
            service, loop = server.server.invoke, server.loop

            def timed(requests: int) -> float:
                run = _runner(service, caller_key, requests)
                return asyncio.run_coroutine_threadsafe(run(), loop).result()

            gc.collect()
            gc.freeze()
            gc.set_threshold(*GC_THRESHOLDS)  # as `agent-reach serve`
            with replaced(_keeping_the_answer()):
                timed(warmup)
            for _ in range(WARMUP_RUNS - 1):
                timed(warmup)
            yield timed
    finally:
        agent.terminate()
        agent.wait()


@contextlib.contextmanager
def coordinator(warmup: int) -> Iterator[Callable[[int], float]]:
    """`_serving` in the environment `_deployed` makes, with a fresh admin key: the
    coordinator every bench built on this one measures."""
    admin = secrets.token_urlsafe(32)
    with (
        tempfile.TemporaryDirectory() as directory,
        _deployed(Path(directory), admin),
        _serving(admin, warmup) as timed,
    ):
        yield timed


def measure(args: argparse.Namespace) -> dict[str, list[float]]:
    """CPU µs per request of each variant, one value per round."""
    with coordinator(args.requests) as timed:
        results: dict[str, list[float]] = {name: [] for name in ["everything on", *VARIANTS]}
        for _ in range(args.rounds):
            results["everything on"].append(timed(args.requests))
            for variant, triples in VARIANTS.items():
                with replaced(triples):
                    results[variant].append(timed(args.requests))
        return results


def _runner(
    service: InvokeService, key: str, requests: int
) -> Callable[[], Coroutine[Any, Any, float]]:
    body = BODY.encode()
    headers = [
        (b"host", b"127.0.0.1"),
        (b"authorization", b"Bearer " + key.encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    each = requests // IN_FLIGHT

    async def caller() -> None:
        for _ in range(each):
            answer, _ = await answer_invoke(service, headers, body)
            if answer.status != 200:
                raise RuntimeError(f"invoke answered {answer.status}: {answer.body[:300]!r}")

    async def run() -> float:
        started = time.process_time()
        await asyncio.gather(*(caller() for _ in range(IN_FLIGHT)))
        return (time.process_time() - started) * 1e6 / (each * IN_FLIGHT)

    return run


def report(results: dict[str, list[float]]) -> list[dict[str, Any]]:
    base = results["everything on"]
    rows = []
    for variant, values in results.items():
        paired = [v - b for v, b in zip(values, base, strict=True)]
        rows.append(
            {
                "variant": variant if variant == "everything on" else f"{variant} off",
                "cpu_us_per_request": round(statistics.median(values), 1),
                "paired_difference_us": round(statistics.median(paired), 1),
            }
        )
    return rows


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="paired rounds")
    parser.add_argument("--requests", type=int, default=6400, help="requests per run")
    parser.add_argument("--json", help="write the rows to this file")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(0, {COORDINATOR_CPU})
    rows = report(measure(args))
    print(f"{args.rounds} paired rounds of {args.requests} requests, {IN_FLIGHT} in flight")
    for row in rows:
        print(
            f"{row['variant']:<36} {row['cpu_us_per_request']:>7.1f} µs/request"
            f"   paired difference {row['paired_difference_us']:+6.1f} µs"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
