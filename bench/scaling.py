"""What one coordinator asks of its Redis, on a single Redis and on a 6-node Redis Cluster.

    .venv/bin/python bench/scaling.py [--duration 8] [--concurrency 16] [--repeat 3]
                                      [--invokes 500] [--json out.json]

One run starts a standalone `redis-server` and a 3-master/3-replica Redis Cluster (the
test kit's), and on each a coordinator (`python -m agent_reach serve`, security off,
decision log off) with `bench/echo_agent.py` registered. Then, per store:

- throughput: `wrk -t1 -c<concurrency>` POSTing invokes, each with a new request_id (so
  every one claims and completes an idempotency record), `--repeat` rounds alternating
  the stores, median reported;
- Redis commands per invoke and the Redis CPU they took (µs, top-level commands: a
  script's time includes what it ran), from INFO commandstats summed over the masters, reset
  before `--invokes` sequential invokes (with and without request_id), minus what the
  same time idle costs (the registry's resync); the hot path sends no pipeline, so each
  command is one round trip;
- the time one invoke takes when they are sent one after another (c=1);
- store bytes (MEMORY USAGE, standalone only): per registered instance, per context and
  per idempotency record.

Prints a table and writes it all with `--json`. Needs wrk (`apt-get install -y wrk`).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
from rich.console import Console
from rich.table import Table

from agent_reach.testing.agent_process import CoordinatorProcess
from agent_reach.testing.ports import free_port
from agent_reach.testing.redis_cluster import RedisClusterServer
from agent_reach.testing.redis_server import RedisServer

REPO = Path(__file__).resolve().parents[1]
CAPABILITY = "echo"
PREFIX = "bench"
WRK_SCRIPT = """
counter = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  counter = counter + 1
  local body = '{"capability":"echo","payload":{"n":1},"request_id":"wrk-' ..
    tostring(counter) .. '-' .. tostring(math.random(1, 1000000000)) .. '"}'
  return wrk.format(nil, nil, nil, body)
end
"""
# The third: the same cluster, each idempotency claim and answer waiting for a replica.
STORES = ("redis", "redis-cluster", "redis-cluster-wait")
# Commands a coordinator sends itself, each one round trip (no pipeline on the hot path);
# every other command in commandstats ran inside one of its scripts.
# WAIT (redis-cluster-wait) shares its script's round trip: it is not counted here.
TOP_LEVEL = frozenset({"evalsha", "eval", "set", "get", "xadd", "xlen", "spublish", "publish"})


def main() -> None:
    args = parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is needed: apt-get install -y wrk")
    console = Console()
    with (
        tempfile.TemporaryDirectory(prefix="agent-reach-scaling-") as tmp,
        deployments(Path(tmp)) as running,
    ):
        results: dict[str, Any] = {store: {"throughput": []} for store in STORES}
        for store in STORES:
            results[store]["commands"] = commands_per_invoke(running[store], args.invokes)
        for round_ in range(args.repeat):
            for store in STORES if round_ % 2 == 0 else reversed(STORES):
                run = wrk(running[store]["url"], args.concurrency, args.duration, Path(tmp))
                results[store]["throughput"].append(run)
        results["bytes"] = store_bytes(running["redis"])
    for store in STORES:
        runs = results[store]["throughput"]
        results[store]["median"] = {
            key: statistics.median(run[key] for run in runs) for key in ("rps", "p50_ms", "p99_ms")
        }
    render(console, results, args)
    if args.json:
        args.json.write_text(json.dumps({"args": vars_of(args), **results}, indent=2))
        console.print(f"written: {args.json}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=8, help="seconds per wrk run")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3, help="wrk rounds per store")
    parser.add_argument("--invokes", type=int, default=500, help="for the command counts")
    parser.add_argument("--json", type=Path)
    return parser.parse_args()


def vars_of(args: argparse.Namespace) -> dict[str, Any]:
    return {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}


@contextmanager
def deployments(tmp: Path) -> Iterator[dict[str, dict[str, Any]]]:
    """A coordinator and the echo agent on each store; everything stopped on exit."""
    agent_port = free_port()
    agent = subprocess.Popen(
        [sys.executable, str(REPO / "bench" / "echo_agent.py"), "--port", str(agent_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    single, cluster = RedisServer(), RedisClusterServer()
    coordinators: list[CoordinatorProcess] = []
    try:
        single.start()
        cluster.start()
        running = {}
        masters = [redis.Redis(port=m.port) for m in cluster.masters()]
        for store, backend, url, clients, env in (
            ("redis", "redis", single.url, [redis.Redis(port=single.port)], {}),
            ("redis-cluster", "redis-cluster", cluster.url, masters, {}),
            ("redis-cluster-wait", "redis-cluster", cluster.url, masters,
             {"AR_REDIS_WAIT_REPLICAS": "1"}),
        ):  # fmt: skip
            coordinator = CoordinatorProcess(
                directory=tmp,
                backend=backend,
                redis_url=url,
                redis_prefix=f"{PREFIX}-{store}",
                extra_env={"AR_AUTH": "off", **env},
            ).start()
            coordinators.append(coordinator)
            register(coordinator.port, agent_port)
            running[store] = {"url": coordinator.url, "port": coordinator.port, "nodes": clients}
        yield running
    finally:
        for coordinator in coordinators:
            coordinator.kill()
        cluster.close()
        single.close()
        agent.kill()
        agent.wait()


def call(port: int, method: str, path: str, body: dict[str, Any] | None = None) -> bytes:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        data = None if body is None else json.dumps(body)
        connection.request(method, path, body=data, headers={"content-type": "application/json"})
        answer = connection.getresponse()
        payload = answer.read()
        if answer.status >= 300:
            raise RuntimeError(f"{method} {path} answered {answer.status}: {payload[:300]!r}")
        return payload
    finally:
        connection.close()


def register(port: int, agent_port: int) -> None:
    spec = {
        "id": "echo-1",
        "capabilities": [CAPABILITY],
        "transport": {"type": "http", "endpoint": f"http://127.0.0.1:{agent_port}/invoke"},
        "ttl": 3600,
    }
    call(port, "POST", "/v1/agents", spec)
    call(port, "POST", "/v1/invoke", {"capability": CAPABILITY, "payload": {}})


def command_counts(nodes: list[redis.Redis]) -> tuple[Counter[str], float]:
    """Calls per command over the masters, and the microseconds the top-level ones took."""
    counts: Counter[str] = Counter()
    usec = 0.0
    for node in nodes:
        for name, stats in node.info("commandstats").items():
            command = name.removeprefix("cmdstat_")
            counts[command] += int(stats["calls"])
            if command in TOP_LEVEL:  # a script's usec includes the commands it ran
                usec += float(stats["usec"])
    return counts, usec


def reset(nodes: list[redis.Redis]) -> None:
    for node in nodes:
        node.config_resetstat()


def commands_per_invoke(running: dict[str, Any], invokes: int) -> dict[str, Any]:
    """Commands per invoke (by command), with and without a request_id, idle cost removed."""
    nodes, port = running["nodes"], running["port"]
    figures: dict[str, Any] = {}
    for label, with_id in (("with_request_id", True), ("without_request_id", False)):
        reset(nodes)
        started = time.monotonic()
        for n in range(invokes):
            body: dict[str, Any] = {"capability": CAPABILITY, "payload": {"n": n}}
            if with_id:
                body["request_id"] = f"count-{label}-{n}-{time.time_ns()}"
            call(port, "POST", "/v1/invoke", body)
        busy_s = time.monotonic() - started
        busy, busy_usec = command_counts(nodes)
        reset(nodes)
        time.sleep(busy_s)
        idle, idle_usec = command_counts(nodes)
        net = {k: (busy[k] - idle.get(k, 0)) / invokes for k in busy}
        net = {
            k: round(v, 3) for k, v in net.items() if abs(v) >= 0.001 and k != "config|resetstat"
        }
        figures[label] = {
            "per_invoke": net,
            "commands_per_invoke": round(sum(net.values()), 3),
            "round_trips_per_invoke": round(sum(v for k, v in net.items() if k in TOP_LEVEL), 3),
            "redis_usec_per_invoke": round((busy_usec - idle_usec) / invokes, 2),
            "sequential_ms_per_invoke": round(busy_s / invokes * 1000, 3),
        }
    return figures


def store_bytes(running: dict[str, Any]) -> dict[str, int]:
    """MEMORY USAGE of what one instance, one context and one idempotency record keep."""
    [node], port = running["nodes"], running["port"]
    registry = sum(
        int(node.memory_usage(key) or 0)
        for key in node.scan_iter(match=f"{PREFIX}-redis:*registry*:*echo-1")
    )
    created = json.loads(
        call(port, "POST", "/v1/contexts", {"document": {"customer": "c-1", "turns": 0}})
    )
    context = sum(
        int(node.memory_usage(key) or 0)
        for key in node.scan_iter(match=f"{PREFIX}-redis:ctx:{{{created['context_id']}}}*")
    )
    request_id = f"bytes-{time.time_ns()}"
    body = {"capability": CAPABILITY, "payload": {}, "request_id": request_id}
    call(port, "POST", "/v1/invoke", body)
    [record] = list(node.scan_iter(match=f"{PREFIX}-redis:idem:*:{request_id}"))
    return {
        "instance": registry,
        "context_small": context,
        "idempotency_record": int(node.memory_usage(record) or 0),
    }


def wrk(url: str, concurrency: int, duration_s: int, tmp: Path) -> dict[str, float]:
    script = tmp / "invoke.lua"
    script.write_text(WRK_SCRIPT)
    done = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{concurrency}",
            f"-d{duration_s}s",
            "--latency",
            "-s",
            str(script),
            f"{url}/v1/invoke",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ},
    )
    out = done.stdout
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        raise RuntimeError(f"wrk saw {errors.group(1)} error answers:\n{out}")
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
        "p50_ms": latency_ms(out, "50%"),
        "p99_ms": latency_ms(out, "99%"),
    }


def latency_ms(out: str, percentile: str) -> float:
    value, unit = re.search(rf"{percentile}\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def render(console: Console, results: dict[str, Any], args: argparse.Namespace) -> None:
    table = Table(
        title=f"one coordinator, wrk -t1 -c{args.concurrency}, a new request_id each; "
        "Redis per invoke with request_id (without)"
    )
    columns = ("store", "invokes/s", "p50 ms", "p99 ms", "c=1 ms", "round trips", "commands",
               "Redis µs")  # fmt: skip
    for column in columns:
        table.add_column(column, justify="right")
    for store in STORES:
        median, commands = results[store]["median"], results[store]["commands"]
        with_id, without_id = commands["with_request_id"], commands["without_request_id"]
        table.add_row(
            store,
            f"{median['rps']:.0f}",
            f"{median['p50_ms']:.2f}",
            f"{median['p99_ms']:.2f}",
            f"{with_id['sequential_ms_per_invoke']:.2f}",
            f"{with_id['round_trips_per_invoke']:.2f} ({without_id['round_trips_per_invoke']:.2f})",
            f"{with_id['commands_per_invoke']:.2f} ({without_id['commands_per_invoke']:.2f})",
            f"{with_id['redis_usec_per_invoke']:.1f} ({without_id['redis_usec_per_invoke']:.1f})",
        )
    console.print(table)
    for store in STORES[1:]:
        ratio = results[store]["median"]["rps"] / results["redis"]["median"]["rps"]
        console.print(f"{store} / redis invokes/s: {ratio:.2f}")
    for store in STORES:
        console.print(f"{store} commands per invoke: {results[store]['commands']}")
    console.print(f"store bytes: {results['bytes']}")


if __name__ == "__main__":
    main()
