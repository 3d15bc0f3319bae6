"""What workflows cost: parallel steps against slow agents, and the coordinator CPU per step.

    .venv/bin/python bench/workflows.py [--runs 10] [--cpu-steps 5000] [--json out.json]

Starts the coordinator (`python -m agent_reach serve`, in-memory backend, security off)
as its own process, the instant echo agent (`bench/echo_agent.py`) as another, and
three agents that answer after 300 ms in this process; then measures, in one run:

  (1) parallel   a run of three independent steps against the 300 ms agents, next to
                 a run of one such step (the goal: three take <= 1.1 x 300 ms);
  (2) per step   CPU per step of 10-step runs against the echo agent, minus CPU per
                 invoke of the same invokes made directly (10 at a time, with request ids
                 as steps have): the orchestration overhead (goal <= 50 us). Measured
                 twice: in process (a coordinator runtime in this process, its thread's
                 CPU, no HTTP edge on either side: what orchestration itself adds) and
                 over HTTP (the coordinator process's CPU, each run one HTTP request);
  (3) 50 steps   a 50-step DAG (5 layers of 10, each step depending on two of the layer
                 before) against the echo agent, next to the same 50 invokes made
                 directly in 5 waves of 10: its wall time and CPU overhead.

Coordinator CPU is read from /proc (every thread's schedstat, nanoseconds). The machine
these figures come from is shared: each figure is a same-run ratio or difference, and the
table says how many samples it is the median of.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvloop
from rich.console import Console
from rich.table import Table

from agent_reach.cli import GC_THRESHOLDS
from agent_reach.clock import SYSTEM_CLOCK
from agent_reach.config import Settings
from agent_reach.model.agents import AgentSpec
from agent_reach.model.invocations import InvokeRequest
from agent_reach.model.keys import ANONYMOUS
from agent_reach.model.workflows import WorkflowRequest
from agent_reach.observability.logging import configure_logging
from agent_reach.observability.tracecontext import new_trace
from agent_reach.policy.source import PolicySource
from agent_reach.server.runtime import open_runtime
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread

REPO = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT_S = 20.0
SLOW_AGENT_S = 0.3  # the issue: "agents that each take 300 ms"
GOAL_PARALLEL_RATIO = 1.1  # three parallel steps within 1.1 x one agent's time
GOAL_STEP_CPU_US = 50.0  # orchestration CPU per step, over the same invokes made directly
FANOUT = 10  # steps per run in the per-step measurement, and invokes in flight directly
CHUNKS = 10  # slices of each CPU sample, direct and workflow ones alternating
LAYERS, WIDTH = 5, 10  # the 50-step DAG


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(url: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=0.5).status_code < 500:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"{url} did not come up within {STARTUP_TIMEOUT_S} s")


def cpu_s(pid: int) -> float:
    """CPU time of every thread of `pid` so far, from /proc/<pid>/task/*/schedstat (ns)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended between listing and reading
    return total / 1e9


@contextmanager
def processes(tmp: Path) -> Iterator[tuple[str, subprocess.Popen[bytes], str]]:
    """The coordinator and the echo agent as processes: the coordinator's URL and process,
    and the echo agent's endpoint."""
    port, echo_port = free_port(), free_port()
    env = {
        **os.environ,
        "AR_REGISTRY_BACKEND": "memory",
        "AR_AUTH": "off",
        "AR_DECISION_LOG": "off",
        "AR_LOG_LEVEL": "warning",
    }
    log = (tmp / "coordinator.log").open("wb")
    coordinator = subprocess.Popen(
        [sys.executable, "-m", "agent_reach", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    echo = subprocess.Popen(
        [sys.executable, str(REPO / "bench" / "echo_agent.py"), "--port", str(echo_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(f"{url}/healthz")
        wait_ready(f"http://127.0.0.1:{echo_port}/health")
        register(url, "echo-1", "echo", f"http://127.0.0.1:{echo_port}/invoke")
        yield url, coordinator, f"http://127.0.0.1:{echo_port}/invoke"
    finally:
        for process in (coordinator, echo):
            process.kill()
            process.wait()
        log.close()


def register(url: str, agent_id: str, capability: str, endpoint: str) -> None:
    body = {
        "id": agent_id,
        "capabilities": [capability],
        "transport": {"endpoint": endpoint},
        "ttl": 86_400,  # nothing heartbeats here: one lease outlasts the run
    }
    httpx.post(f"{url}/v1/agents", json=body, timeout=5).raise_for_status()


def run_workflow(http: httpx.Client, steps: list[dict[str, Any]]) -> dict[str, Any]:
    answer = http.post("/v1/workflows/run", json={"steps": steps}, timeout=30)
    answer.raise_for_status()
    body: dict[str, Any] = answer.json()
    if body["status"] != "ok":
        raise SystemExit(f"a benchmark run did not end ok: {body}")
    return body


def measure_parallel(url: str, runs: int) -> dict[str, Any]:
    """Wall time of a run of 3 parallel 300 ms steps, and of a run of one."""
    servers = [
        ServerThread(FakeAgent(name=f"slow-{i}", delay_s=SLOW_AGENT_S)).start() for i in range(3)
    ]
    try:
        for i, server in enumerate(servers):
            register(url, f"slow-{i}", f"slow.step{i}", f"{server.url}/invoke")
        three = [{"id": f"s{i}", "action": f"slow.step{i}"} for i in range(3)]
        with httpx.Client(base_url=url) as http:
            run_workflow(http, three)  # warm: connections to the agents are open
            samples: dict[str, list[float]] = {"one": [], "three": [], "inside": []}
            for _ in range(runs):
                for name, steps in (("one", three[:1]), ("three", three)):
                    started = time.perf_counter()
                    body = run_workflow(http, steps)
                    samples[name].append((time.perf_counter() - started) * 1000)
                samples["inside"].append(max(step["ended_ms"] for step in body["steps"]))
    finally:
        for server in servers:
            server.stop()
    one, three_ms = statistics.median(samples["one"]), statistics.median(samples["three"])
    return {
        "runs": runs,
        "agent_ms": SLOW_AGENT_S * 1000,
        "one_step_ms_p50": round(one, 1),
        "three_steps_ms_p50": round(three_ms, 1),
        "three_steps_ms_max": round(max(samples["three"]), 1),
        "three_steps_ms_in_coordinator_p50": round(statistics.median(samples["inside"]), 1),
        "ratio_to_agent": round(three_ms / (SLOW_AGENT_S * 1000), 3),
        "goal_ratio": GOAL_PARALLEL_RATIO,
        "met": three_ms <= GOAL_PARALLEL_RATIO * SLOW_AGENT_S * 1000,
    }


def coordinator_cpu(pid: int, work: Callable[[], object]) -> tuple[float, float]:
    """(coordinator CPU seconds, wall seconds) spent on `work`."""
    before, started = cpu_s(pid), time.perf_counter()
    work()
    return cpu_s(pid) - before, time.perf_counter() - started


def direct_invokes(http: httpx.Client, pool: ThreadPoolExecutor, prefix: str, count: int) -> None:
    """`count` invokes of `echo` with request ids, FANOUT in flight at once."""

    def one(i: int) -> None:
        body = {"capability": "echo", "payload": {"i": i}, "request_id": f"{prefix}-{i}"}
        http.post("/v1/invoke", json=body, timeout=30).raise_for_status()

    list(pool.map(one, range(count)))


def measure_step_cpu(url: str, pid: int, steps: int, repeats: int) -> dict[str, Any]:
    """Coordinator CPU per step of FANOUT-step runs, and per direct invoke.

    Each sample alternates CHUNKS slices of direct invokes and of runs, so a drift in
    what the shared machine gives the coordinator weighs on both alike.
    """
    runs = max(CHUNKS, steps // FANOUT // CHUNKS * CHUNKS)
    fan = [{"id": f"s{i}", "action": "echo", "param": {"i": i}} for i in range(FANOUT)]
    per_step, per_invoke = [], []
    with (
        httpx.Client(base_url=url, limits=httpx.Limits(max_connections=64)) as http,
        ThreadPoolExecutor(FANOUT) as pool,
    ):
        direct_invokes(http, pool, "warm", 2000)
        for _ in range(20):
            run_workflow(http, fan)
        for repeat in range(repeats):
            direct_cpu = workflow_cpu = 0.0
            for chunk in range(CHUNKS):

                def direct(tag: str = f"d{repeat}-{chunk}") -> None:
                    direct_invokes(http, pool, tag, runs // CHUNKS * FANOUT)

                def workflows() -> None:
                    for _ in range(runs // CHUNKS):
                        run_workflow(http, fan)

                direct_cpu += coordinator_cpu(pid, direct)[0]
                workflow_cpu += coordinator_cpu(pid, workflows)[0]
            per_invoke.append(direct_cpu / (runs * FANOUT) * 1e6)
            per_step.append(workflow_cpu / (runs * FANOUT) * 1e6)
    overheads = [s - d for s, d in zip(per_step, per_invoke, strict=True)]
    overhead = statistics.median(overheads)
    return {
        "steps_per_sample": runs * FANOUT,
        "samples": repeats,
        "invoke_cpu_us_p50": round(statistics.median(per_invoke), 1),
        "step_cpu_us_p50": round(statistics.median(per_step), 1),
        "overhead_us_per_step_p50": round(overhead, 1),
        "overhead_us_per_step_all": [round(o, 1) for o in overheads],
        "goal_us": GOAL_STEP_CPU_US,
        "met": overhead <= GOAL_STEP_CPU_US,
    }


async def _in_process(echo_url: str, runs: int, repeats: int) -> tuple[list[float], list[float]]:
    """(CPU per step, CPU per direct invoke) samples, in microseconds, of a coordinator
    runtime in this process: no HTTP edge on either side, only what orchestration adds."""
    configure_logging("warning", json=False)
    gc.freeze()  # as `agent-reach serve` does
    gc.set_threshold(*GC_THRESHOLDS)
    settings = Settings(registry_backend="memory", decision_log="off", auth="off")
    async with open_runtime(settings, SYSTEM_CLOCK, PolicySource(SYSTEM_CLOCK)) as runtime:
        spec = AgentSpec.model_validate(
            {"id": "echo-1", "capabilities": ["echo"], "transport": {"endpoint": echo_url},
             "ttl": 86_400}
        )  # fmt: skip
        await runtime.registry.register(spec)
        fan = WorkflowRequest.model_validate(
            {"steps": [{"id": f"s{i}", "action": "echo", "param": {"i": i}} for i in range(FANOUT)]}
        )

        async def workflow_run() -> None:
            answer = await runtime.orchestrator.start_inline(fan, ANONYMOUS, new_trace())
            if b'"status":"ok"' not in answer.body[:200]:
                raise SystemExit(f"a benchmark run did not end ok: {answer.body[:300]!r}")

        async def direct_wave(tag: str) -> None:
            requests = [
                InvokeRequest(capability="echo", payload={"i": i}, request_id=f"{tag}-{i}")
                for i in range(FANOUT)
            ]
            answers = await asyncio.gather(
                *(runtime.invoke.handle(r, new_trace()) for r in requests)
            )
            if any(a.status != 200 for a in answers):
                raise SystemExit("a direct invoke failed")

        for i in range(50):
            await workflow_run()
            await direct_wave(f"warm-{i}")
        per_step, per_invoke = [], []
        for repeat in range(repeats):
            step_cpu = invoke_cpu = 0.0
            for chunk in range(CHUNKS):
                started = time.thread_time()
                for wave in range(runs // CHUNKS):
                    await direct_wave(f"d{repeat}-{chunk}-{wave}")
                invoke_cpu += time.thread_time() - started
                started = time.thread_time()
                for _ in range(runs // CHUNKS):
                    await workflow_run()
                step_cpu += time.thread_time() - started
            per_step.append(step_cpu / (runs * FANOUT) * 1e6)
            per_invoke.append(invoke_cpu / (runs * FANOUT) * 1e6)
    return per_step, per_invoke


def measure_in_process(echo_url: str, steps: int, repeats: int) -> dict[str, Any]:
    runs = max(CHUNKS, steps // FANOUT // CHUNKS * CHUNKS)
    per_step, per_invoke = uvloop.run(_in_process(echo_url, runs, repeats))
    overheads = [s - d for s, d in zip(per_step, per_invoke, strict=True)]
    overhead = statistics.median(overheads)
    return {
        "steps_per_sample": runs * FANOUT,
        "samples": repeats,
        "invoke_cpu_us_p50": round(statistics.median(per_invoke), 1),
        "step_cpu_us_p50": round(statistics.median(per_step), 1),
        "overhead_us_per_step_p50": round(overhead, 1),
        "overhead_us_per_step_all": [round(o, 1) for o in overheads],
        "goal_us": GOAL_STEP_CPU_US,
        "met": overhead <= GOAL_STEP_CPU_US,
    }


def fifty_step_dag() -> list[dict[str, Any]]:
    steps = []
    for layer in range(LAYERS):
        for i in range(WIDTH):
            step: dict[str, Any] = {"id": f"l{layer}-{i}", "action": "echo", "param": {"i": i}}
            if layer:
                step["depends_on"] = [f"l{layer - 1}-{i}", f"l{layer - 1}-{(i + 1) % WIDTH}"]
            steps.append(step)
    return steps


def measure_dag(url: str, pid: int, repeats: int) -> dict[str, Any]:
    """A 50-step DAG against its 50 invokes made directly in LAYERS waves of WIDTH."""
    dag = fifty_step_dag()
    samples: dict[str, list[float]] = {"wf_ms": [], "direct_ms": [], "wf_cpu": [], "direct_cpu": []}
    with (
        httpx.Client(base_url=url, limits=httpx.Limits(max_connections=64)) as http,
        ThreadPoolExecutor(WIDTH) as pool,
    ):
        run_workflow(http, dag)
        for repeat in range(repeats):

            def waves(r: int = repeat) -> None:
                for layer in range(LAYERS):
                    direct_invokes(http, pool, f"dag{r}-{layer}", WIDTH)

            cpu, wall = coordinator_cpu(pid, waves)
            samples["direct_cpu"].append(cpu)
            samples["direct_ms"].append(wall * 1000)
            cpu, wall = coordinator_cpu(pid, lambda: run_workflow(http, dag))
            samples["wf_cpu"].append(cpu)
            samples["wf_ms"].append(wall * 1000)
    wf_ms, direct_ms = statistics.median(samples["wf_ms"]), statistics.median(samples["direct_ms"])
    extra_cpu = statistics.median(
        w - d for w, d in zip(samples["wf_cpu"], samples["direct_cpu"], strict=True)
    )
    return {
        "steps": len(dag),
        "samples": repeats,
        "run_ms_p50": round(wf_ms, 2),
        "direct_waves_ms_p50": round(direct_ms, 2),
        "added_ms_p50": round(wf_ms - direct_ms, 2),
        "added_cpu_ms_per_run": round(extra_cpu * 1000, 2),
        "added_cpu_us_per_step": round(extra_cpu / len(dag) * 1e6, 1),
    }


def report(figures: dict[str, Any]) -> Table:
    table = Table(title="workflows (coordinator in its own process; the machine is shared)")
    table.add_column("measure", style="bold")
    table.add_column("figure", justify="right")
    table.add_column("goal", justify="right")
    p, s, d = figures["parallel"], figures["per_step"], figures["dag50"]
    table.add_row("1 step vs 300 ms agent (p50)", f"{p['one_step_ms_p50']} ms", "")
    table.add_row(
        "3 parallel steps vs 300 ms agents (p50)",
        f"{p['three_steps_ms_p50']} ms = {p['ratio_to_agent']} x",
        f"<= {GOAL_PARALLEL_RATIO} x  {'met' if p['met'] else 'MISSED'}",
    )
    table.add_row(
        "the same, from creation to the last step's end",
        f"{p['three_steps_ms_in_coordinator_p50']} ms",
        "",
    )
    i = figures["in_process"]
    table.add_row(
        "in process: CPU per invoke / per step",
        f"{i['invoke_cpu_us_p50']} / {i['step_cpu_us_p50']} us",
        "",
    )
    table.add_row(
        "in process: orchestration CPU per step",
        f"{i['overhead_us_per_step_p50']} us",
        f"<= {GOAL_STEP_CPU_US} us  {'met' if i['met'] else 'MISSED'}",
    )
    table.add_row(
        "over HTTP: CPU per invoke / per step",
        f"{s['invoke_cpu_us_p50']} / {s['step_cpu_us_p50']} us",
        "",
    )
    table.add_row(
        "over HTTP: CPU per step over an invoke",
        f"{s['overhead_us_per_step_p50']} us",
        f"<= {GOAL_STEP_CPU_US} us  {'met' if s['met'] else 'MISSED'}",
    )
    table.add_row(
        "50-step DAG run vs 5 waves of 10 invokes",
        f"{d['run_ms_p50']} vs {d['direct_waves_ms_p50']} ms (+{d['added_ms_p50']} ms)",
        "",
    )
    table.add_row(
        "50-step DAG: added CPU",
        f"{d['added_cpu_ms_per_run']} ms/run = {d['added_cpu_us_per_step']} us/step",
        "",
    )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="samples of the parallel measure")
    parser.add_argument("--cpu-steps", type=int, default=5000, help="steps per CPU sample")
    parser.add_argument("--repeats", type=int, default=7, help="CPU samples (median kept)")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, processes(Path(tmp)) as (url, coordinator, echo):
        figures = {
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
            "parallel": measure_parallel(url, args.runs),
            "in_process": measure_in_process(echo, args.cpu_steps, args.repeats),
            "per_step": measure_step_cpu(url, coordinator.pid, args.cpu_steps, args.repeats),
            "dag50": measure_dag(url, coordinator.pid, args.repeats),
        }
    Console().print(report(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
