"""Overload: find the knee, then 2x the knee for 30 s, then 50 %.

    .venv/bin/python bench/overload.py [--overload-s 30] [--max-in-flight N] [--json out.json]

Starts the echo agent (`bench/echo_agent.py`) and a coordinator
(`python -m agent_reach serve`, memory backend, security off) pinned to CPU 1, and
drives it open-loop from this process on CPU 0 (arrivals on a fixed schedule, so
queueing shows as latency, not as a slower sender; one fixed body without a
request_id, so no idempotency record or remembered answer grows with the count):

1. baseline: 50 req/s for 5 s -> B50, B99;
2. knee: rising rates, 3 s each, with no admission limit; the knee is the highest
   rate answered in full (>= 99 % ok) with p99 <= 3 x B99;
3. overload: 2 x knee for `--overload-s` with `AR_MAX_IN_FLIGHT` (default from the
   knee: 4 x its in-flight count by Little's law, at least 8), then 50 % of the knee
   for 10 s; and the same without a limit (`AR_MAX_IN_FLIGHT=0`) for comparison.

Checks per overload run: admitted p99 <= 3 x B99; every shed request got 503
`overloaded` with Retry-After; coordinator RSS growth < 50 MB (from a coordinator
warmed up with 11,000 requests at the knee, so its bounded stores are already full);
event-loop lag (the coordinator's own gauge, scraped every 0.5 s) < 100 ms; after the
overload, the first 1 s window whose p99 <= 3 x B99 with nothing shed comes within 5 s.
The machine may be shared: figures are noisy; compare ratios within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import orjson
import uvloop
from rich.console import Console
from rich.table import Table

from agent_reach.wire.pool import HttpPool, PoolError
from overhead import BenchError, free_ports, http_call, wait_healthy

REPO = Path(__file__).resolve().parents[1]
SERVER_CPU, LOAD_CPU = "1", 0
CAPABILITY = "echo"
BODY = orjson.dumps({"capability": CAPABILITY, "payload": {"q": "ping"}})
HEADERS = (("content-type", "application/json"),)
BASELINE_RATE, BASELINE_S = 100.0, 10.0
KNEE_START, KNEE_FACTOR, KNEE_STEP_S, KNEE_MAX = 200.0, 1.3, 4.0, 20_000.0
KNEE_TRIES = 2  # a rate misses the knee only when it misses twice
# Warm-up: enough requests at the knee to fill the bounded in-memory stores (10,000
# traces, 10,000 journal entries), so RSS growth shows queues, not stores filling up.
WARMUP_REQUESTS, WARMUP_MAX_S = 11_000, 30.0
RECOVERY_S, WINDOW_S = 10.0, 1.0
TIMEOUT_S = 10.0  # far above any answer: a late answer shows as latency, not as loss
# The overload goals: admitted p99 within 3x the baseline's, RSS growth under 50 MB, loop
# lag under 100 ms, back to normal within 5 s of the overload ending.
GOAL_P99_RATIO, GOAL_RSS_MB, GOAL_LAG_MS, GOAL_RECOVERY_S = 3.0, 50.0, 100.0, 5.0


@dataclass(frozen=True, slots=True)
class Sample:
    """One request: when it was due (s since the run began), its latency and answer."""

    due_s: float
    latency_ms: float | None
    status: int
    code: str
    retry_after: bool
    late_ms: float  # how long after its due time the sender got to it (the sender's lag)


@dataclass
class Step:
    rate: float
    ok_share: float
    p50_ms: float | None
    p99_ms: float | None


@dataclass
class OverloadRun:
    max_in_flight: int
    rate: float
    sent: int
    admitted: int
    shed_503: int
    shed_degraded: int
    shed_without_retry_after: int
    other_errors: int
    admitted_p99_ms: float | None
    rss_growth_mb: float
    max_loop_lag_ms: float
    recovery_s: float | None
    sender_late_p99_ms: float | None  # the load generator's own lag: large, its figures
    errors_by_code: dict[str, int] = field(default_factory=dict)
    goals: dict[str, bool] = field(default_factory=dict)


def main() -> None:
    args = parse_args()
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(0, {LOAD_CPU})
    console = Console(width=160)
    try:
        report = run(args, console)
    except BenchError as exc:
        sys.exit(f"error: {exc}")
    render(console, report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
        console.print(f"wrote {args.json}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--overload-s", type=float, default=30.0, help="seconds at 2x the knee")
    parser.add_argument("--max-in-flight", type=int, help="AR_MAX_IN_FLIGHT (default: from knee)")
    parser.add_argument("--knee", type=float, help="skip the search and use this rate (req/s)")
    parser.add_argument("--no-compare", action="store_true", help="skip the run without limit")
    parser.add_argument("--json", help="write the results to this file")
    parser.add_argument(
        "--agent-ms",
        type=float,
        help="the echo agent serves each request this long, --agent-workers at once "
        "(default: at once, so the knee is the coordinator's CPU)",
    )
    parser.add_argument("--agent-workers", type=int, default=8)
    return parser.parse_args()


def run(args: argparse.Namespace, console: Console) -> dict[str, object]:
    agent: tuple[str, ...] = ()
    if args.agent_ms is not None:
        agent = ("--service-ms", str(args.agent_ms), "--workers", str(args.agent_workers))
    with coordinator(0, agent) as (url, _):
        baseline = latencies(drive(url, [(BASELINE_RATE, BASELINE_S)]))
        b50, b99 = percentile(baseline, 0.5), percentile(baseline, 0.99)
        assert b50 is not None and b99 is not None  # every baseline request is answered
        console.print(f"baseline: p50 {b50:.2f} ms, p99 {b99:.2f} ms at {BASELINE_RATE:g} req/s")
        steps = [] if args.knee else find_knee(url, b99, console)
    knee = args.knee or max((s.rate for s in steps if is_fine(s, b99)), default=KNEE_START)
    in_flight_at_knee = knee * b50 / 1000
    limit = args.max_in_flight or max(8, math.ceil(4 * in_flight_at_knee))
    console.print(f"knee {knee:.0f} req/s (~{in_flight_at_knee:.1f} in flight); limit {limit}")
    runs = [overload(limit, knee, args.overload_s, b99, console, agent)]
    if not args.no_compare:
        runs.append(overload(0, knee, args.overload_s, b99, console, agent))
    return {
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_1m_at_end": os.getloadavg()[0],
            "note": "shared with other work: figures are noisy",
        },
        "agent": {"service_ms": args.agent_ms, "workers": args.agent_workers if agent else None},
        "baseline": {"rate": BASELINE_RATE, "p50_ms": b50, "p99_ms": b99},
        "knee": {"rate": knee, "steps": [asdict(s) for s in steps]},
        "overload": [asdict(r) for r in runs],
    }


def find_knee(url: str, b99: float, console: Console) -> list[Step]:
    """Rising rates until one is no longer answered in full within 3 x B99."""
    steps: list[Step] = []
    rate = KNEE_START
    while rate <= KNEE_MAX:
        for _ in range(KNEE_TRIES):  # a shared machine stalls now and then: one more try
            samples = drive(url, [(rate, KNEE_STEP_S)])
            answered = latencies(samples)
            ok = sum(s.code == "ok" for s in samples) / len(samples)
            step = Step(round(rate), ok, percentile(answered, 0.5), percentile(answered, 0.99))
            steps.append(step)
            console.print(f"  {rate:7.0f} req/s: ok {ok:.1%}, p99 {step.p99_ms or 0:.1f} ms")
            if is_fine(step, b99):
                break
        else:
            break
        rate *= KNEE_FACTOR
    return steps


def is_fine(step: Step, b99: float) -> bool:
    return step.ok_share >= 0.99 and step.p99_ms is not None and step.p99_ms <= 3 * b99


def overload(
    limit: int,
    knee: float,
    duration_s: float,
    b99: float,
    console: Console,
    agent: tuple[str, ...] = (),
) -> OverloadRun:
    """Warm-up at the knee, then 2 x knee for `duration_s`, then knee/2, on a fresh coordinator."""
    with coordinator(limit, agent) as (url, pid):
        drive(url, [(knee, min(WARMUP_MAX_S, WARMUP_REQUESTS / knee))])
        rss_before = rss_mb(pid)
        lag = LagWatch(url).start()
        rss = RssWatch(pid).start()
        samples = drive(url, [(2 * knee, duration_s), (knee / 2, RECOVERY_S)])
        lag.stop()
        rss.stop()
    over = [s for s in samples if s.due_s < duration_s]
    calm = [s for s in samples if s.due_s >= duration_s]
    admitted = [s for s in over if s.code == "ok"]
    shed = [s for s in over if s.code == "overloaded"]
    result = OverloadRun(
        max_in_flight=limit,
        rate=round(2 * knee),
        sent=len(over),
        admitted=len(admitted),
        shed_503=len(shed),
        shed_degraded=sum(s.code == "degraded" for s in over),
        shed_without_retry_after=sum(not (s.status == 503 and s.retry_after) for s in shed),
        other_errors=sum(s.code not in ("ok", "overloaded", "degraded") for s in over),
        admitted_p99_ms=percentile(latencies(admitted), 0.99),
        rss_growth_mb=round(rss.peak_mb - rss_before, 1),
        max_loop_lag_ms=round(lag.worst_s * 1000, 1),
        recovery_s=recovery_s(calm, duration_s, b99),
        sender_late_p99_ms=percentile(sorted(s.late_ms for s in over), 0.99),
        errors_by_code=dict(
            Counter(s.code for s in over if s.code not in ("ok", "overloaded", "degraded"))
        ),
    )
    result.goals = {
        "admitted_p99": result.admitted_p99_ms is not None
        and result.admitted_p99_ms <= GOAL_P99_RATIO * b99,
        "retry_after": result.shed_without_retry_after == 0,
        "rss": result.rss_growth_mb < GOAL_RSS_MB,
        "loop_lag": result.max_loop_lag_ms < GOAL_LAG_MS,
        "recovery": result.recovery_s is not None and result.recovery_s <= GOAL_RECOVERY_S,
    }
    console.print(f"  limit {limit or 'none'}: {asdict(result)}")
    return result


def recovery_s(calm: list[Sample], overload_end_s: float, b99: float) -> float | None:
    """Seconds from the end of the overload to the first calm window back to normal."""
    windows: dict[int, list[Sample]] = {}
    for sample in calm:
        windows.setdefault(int((sample.due_s - overload_end_s) / WINDOW_S), []).append(sample)
    for index in sorted(windows):
        window = windows[index]
        p99 = percentile(latencies(window), 0.99)
        if all(s.code == "ok" for s in window) and p99 is not None and p99 <= 3 * b99:
            return round(index * WINDOW_S, 1)
    return None


def drive(url: str, phases: list[tuple[float, float]]) -> list[Sample]:
    """Send on a fixed schedule: `(rate, seconds)` phases back to back; every answer kept."""
    samples: list[Sample] = []

    async def main() -> None:
        pool = HttpPool()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.TaskGroup() as group:
                start, offset = loop.time(), 0.0
                for rate, seconds in phases:
                    for n in range(round(rate * seconds)):
                        due = offset + n / rate
                        pause = start + due - loop.time()
                        if pause > 0:
                            await asyncio.sleep(pause)
                        group.create_task(send(pool, due, start, loop.time))
                    offset += seconds
        finally:
            await pool.aclose()

    async def send(pool: HttpPool, due: float, start: float, now: Callable[[], float]) -> None:
        late_ms = (now() - start - due) * 1000  # the loop's clock: uvloop's counts whole ms
        sent = time.perf_counter()
        try:
            response = await pool.request(
                "POST", f"{url}/v1/invoke", headers=HEADERS, body=BODY, timeout_s=TIMEOUT_S
            )
        except PoolError as exc:
            samples.append(Sample(due, None, 0, type(exc).__name__, False, late_ms))
            return
        latency_ms = (time.perf_counter() - sent) * 1000
        answer = orjson.loads(response.body)
        error = answer.get("error") if isinstance(answer, dict) else None
        code = error.get("code", "error") if isinstance(error, dict) else answer.get("status")
        retry_after = any(name == b"retry-after" for name, _ in response.headers)
        samples.append(Sample(due, latency_ms, response.status, str(code), retry_after, late_ms))

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())
    return sorted(samples, key=lambda s: s.due_s)


def latencies(samples: list[Sample]) -> list[float]:
    return sorted(s.latency_ms for s in samples if s.latency_ms is not None)


def percentile(sorted_ms: list[float], share: float) -> float | None:
    if not sorted_ms:
        return None
    return round(sorted_ms[min(len(sorted_ms) - 1, int(share * len(sorted_ms)))], 3)


class RssWatch:
    """Samples a process's resident memory every 0.2 s; keeps the peak."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_mb = rss_mb(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> RssWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            with contextlib.suppress(OSError, BenchError):
                self.peak_mb = max(self.peak_mb, rss_mb(self.pid))


class LagWatch:
    """Scrapes the coordinator's event-loop lag gauge every 0.5 s; keeps the worst."""

    def __init__(self, url: str) -> None:
        self.port = int(url.rsplit(":", 1)[1])
        self.worst_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> LagWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            with contextlib.suppress(OSError, ValueError):
                _, body = http_call(self.port, "GET", "/metrics")
                for line in body.decode().splitlines():
                    if line.startswith("agent_reach_event_loop_lag_seconds "):
                        self.worst_s = max(self.worst_s, float(line.split()[1]))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise BenchError(f"no VmRSS for process {pid}")


@contextlib.contextmanager
def coordinator(
    max_in_flight: int, agent_options: tuple[str, ...] = ()
) -> Iterator[tuple[str, int]]:
    """The echo agent (with `agent_options`) and a coordinator with `AR_MAX_IN_FLIGHT`,
    pinned to SERVER_CPU."""
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="ar-overload-") as tmp:

        def start(name: str, cmd: list[str], env: dict[str, str] | None = None) -> int:
            with (Path(tmp) / f"{name}.log").open("wb") as log:
                procs.append(
                    subprocess.Popen(
                        ["taskset", "-c", SERVER_CPU, *cmd],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=env,
                    )
                )
            return len(procs) - 1

        try:
            agent_port, port = free_ports(2)
            echo = [
                sys.executable,
                str(REPO / "bench" / "echo_agent.py"),
                "--port",
                str(agent_port),
                *agent_options,
            ]
            agent = procs[start("agent", echo)]
            wait_healthy("echo agent", agent, agent_port, "/health", Path(tmp) / "agent.log")
            env = dict(
                os.environ,
                AR_AUTH="off",
                AR_DECISION_LOG="off",
                AR_LOG_LEVEL="warning",
                AR_MAX_IN_FLIGHT=str(max_in_flight),
                PYTHONPATH=str(REPO / "src"),
            )
            cmd = [sys.executable, "-m", "agent_reach", "serve", "--port", str(port)]
            coord = procs[start("coordinator", cmd, env)]
            wait_healthy("coordinator", coord, port, "/healthz", Path(tmp) / "coordinator.log")
            registration = {
                "id": "echo-01",
                "capabilities": [CAPABILITY],
                "transport": {"endpoint": f"http://127.0.0.1:{agent_port}/invoke"},
                "ttl": 3600,
            }
            status, body = http_call(port, "POST", "/v1/agents", json.dumps(registration))
            if status != 201:
                raise BenchError(f"registering the echo agent answered {status}: {body[:300]!r}")
            yield f"http://127.0.0.1:{port}", coord.pid
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(10)


def render(console: Console, report: dict[str, object]) -> None:
    table = Table(title="overload", title_justify="left")
    for column in (
        "AR_MAX_IN_FLIGHT",
        "rate",
        "sent",
        "admitted",
        "shed 503",
        "degraded",
        "errors",
        "admitted p99",
        "RSS +MB",
        "loop lag",
        "recovery",
        "goals",
    ):
        table.add_column(column, justify="right")
    runs = report["overload"]
    assert isinstance(runs, list)
    for r in runs:
        goals = r["goals"]
        table.add_row(
            str(r["max_in_flight"] or "none"),
            f"{r['rate']:.0f}/s",
            str(r["sent"]),
            str(r["admitted"]),
            str(r["shed_503"]),
            str(r["shed_degraded"]),
            str(r["other_errors"]),
            "-" if r["admitted_p99_ms"] is None else f"{r['admitted_p99_ms']:.1f} ms",
            f"{r['rss_growth_mb']:.1f}",
            f"{r['max_loop_lag_ms']:.0f} ms",
            "-" if r["recovery_s"] is None else f"{r['recovery_s']:.0f} s",
            " ".join(f"{k}:{'ok' if v else 'MISSED'}" for k, v in goals.items()),
        )
    console.print(table)


if __name__ == "__main__":
    main()
