"""The SDK agents' own cost per delivery: the TypeScript SDK's against the Python SDK's.

    .venv/bin/python bench/sdk_agents.py [--requests 2000] [--repeat 3] [--json out.json]

One coordinator (`agent-reach serve`, memory backend, security on) and three agents
registered with it, each answering the same small JSON: the bare echo agent
(`bench/echo_agent.py`: an asyncio Protocol, no framework, the baseline), a Python SDK
agent (`agent_reach.Agent` under uvicorn) and a TypeScript SDK agent
(`bench/ts_agent.mjs`, `@agent-reach/sdk` built in clients/typescript). One client
sends requests one at a time over kept-alive connections, to each target in turn in
blocks of 50, so all three see the same machine at the same moments:

  direct   POST <agent>/invoke with a delivery body (a fresh request id each)
  coord    POST <coordinator>/v1/invoke naming the agent's capability

An SDK's added latency per delivery is its p50 less the bare agent's, direct and
through the coordinator; the goal is the TypeScript SDK's within 1.2x the Python
SDK's. Prints the medians over the repeats; `--json` writes every repeat.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import select
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TS_AGENT = REPO / "bench" / "ts_agent.mjs"
TS_DIST = REPO / "clients" / "typescript" / "dist" / "index.js"
STARTUP_TIMEOUT_S = 60.0
BLOCK = 50  # requests to one target before the next one's turn
GOAL_RATIO = 1.2
PAYLOAD = {"order_id": "A-1029384", "user": "u-88231", "items": [{"sku": "X5-BLUE-256", "qty": 1}]}
TARGETS = ("bare", "python-sdk", "ts-sdk")

PYTHON_AGENT = """
import sys
from agent_reach import Agent
coordinator, key, agent_id, capability, port = sys.argv[1:]
agent = Agent(agent_id, [capability], coordinator_url=coordinator, api_key=key)
@agent.handler
async def echo(request):
    return {"echo": "pong", "ok": True}
agent.serve(port=int(port), log_level="warning")
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, path: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    host, port = url.removeprefix("http://").split(":")
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection(host, int(port), timeout=2)
            conn.request("GET", path)
            if conn.getresponse().status < 500:
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url}{path} did not answer within {STARTUP_TIMEOUT_S} s")


@contextmanager
def process(
    command: list[str], env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    try:
        yield child
    finally:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()


def port_line(child: subprocess.Popen[str]) -> int:
    assert child.stdout is not None
    ready, _, _ = select.select([child.stdout], [], [], STARTUP_TIMEOUT_S)
    line = child.stdout.readline() if ready else ""
    if not line.startswith("PORT "):
        raise SystemExit(f"the TypeScript agent did not start: {line!r}")
    return int(line.split()[1])


def register(coordinator: str, key: str, agent_id: str, capability: str, endpoint: str) -> None:
    body = {
        "id": agent_id,
        "capabilities": [capability],
        "ttl": 3600,
        "transport": {"type": "http", "endpoint": endpoint},
    }
    call(coordinator, "POST", "/v1/agents", body, key, expect=201)


def call(base: str, method: str, path: str, body: object, key: str, expect: int = 200) -> object:
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    headers = {"content-type": "application/json", "authorization": f"Bearer {key}"}
    conn.request(method, path, json.dumps(body), headers)
    answer = conn.getresponse()
    data = answer.read()
    if answer.status != expect:
        raise SystemExit(f"{method} {path}: {answer.status} {data[:300]!r}")
    return json.loads(data) if data else None


class Target:
    """One way to reach one agent: a kept-alive connection and the body of each request."""

    def __init__(self, base: str, path: str, body: Callable[[], bytes], key: str | None) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=30)
        self.path, self.body = path, body
        self.headers = {"content-type": "application/json"}
        if key is not None:
            self.headers["authorization"] = f"Bearer {key}"
        self.samples: list[float] = []

    def once(self) -> None:
        body = self.body()
        started = time.perf_counter()
        self.conn.request("POST", self.path, body, self.headers)
        answer = self.conn.getresponse()
        answer.read()
        self.samples.append(time.perf_counter() - started)
        if answer.status != 200:
            raise SystemExit(f"POST {self.path}: {answer.status}")


def delivery(capability: str) -> Callable[[], bytes]:
    def body() -> bytes:
        return json.dumps(
            {
                "request_id": uuid.uuid4().hex,
                "capability": capability,
                "payload": PAYLOAD,
                "context": None,
                "trace_id": secrets.token_hex(16),
                "hop": 8,
            }
        ).encode()

    return body


def invoke(capability: str) -> Callable[[], bytes]:
    encoded = json.dumps({"capability": capability, "payload": PAYLOAD}).encode()
    return lambda: encoded


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def measure(targets: dict[str, Target], requests: int) -> dict[str, dict[str, float]]:
    for target in targets.values():  # warm up: connections, JITs, caches
        for _ in range(200):
            target.once()
        target.samples.clear()
    for _ in range(requests // BLOCK):
        for target in targets.values():
            for _ in range(BLOCK):
                target.once()
    return {
        name: {"p50_ms": percentile(t.samples, 0.5), "p99_ms": percentile(t.samples, 0.99)}
        for name, t in targets.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="per target and repeat")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not TS_DIST.exists():
        raise SystemExit(
            "build the SDK first: cd clients/typescript && npm install && npm run build"
        )
    admin = secrets.token_urlsafe(24)
    port = free_port()
    coordinator = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AR_")}
    env.update(AR_ADMIN_KEY=admin, AR_LOG_LEVEL="warning")
    agent_reach = str(Path(sys.executable).parent / "agent-reach")
    bare_port, py_port = free_port(), free_port()
    with (
        process([agent_reach, "serve", "--port", str(port)], env),
        process([sys.executable, str(REPO / "bench" / "echo_agent.py"), "--port", str(bare_port)]),
    ):
        wait_http(coordinator, "/healthz")
        register(coordinator, admin, "bare-1", "bench.bare", f"http://127.0.0.1:{bare_port}/invoke")
        with (
            process(
                [
                    sys.executable,
                    "-c",
                    PYTHON_AGENT,
                    coordinator,
                    admin,
                    "py-1",
                    "bench.py",
                    str(py_port),
                ],
                env,
            ),
            process(["node", str(TS_AGENT), coordinator, admin, "ts-1", "bench.ts"]) as ts,
        ):
            ts_port = port_line(ts)
            wait_http(f"http://127.0.0.1:{py_port}", "/health")
            wait_http(f"http://127.0.0.1:{bare_port}", "/health")
            ports = {
                "bare": (bare_port, "bench.bare"),
                "python-sdk": (py_port, "bench.py"),
                "ts-sdk": (ts_port, "bench.ts"),
            }
            time.sleep(1.0)  # the Python agent registers once uvicorn has started
            runs = []
            for repeat in range(args.repeat):
                targets = {}
                for name, (agent_port, capability) in ports.items():
                    targets[f"direct {name}"] = Target(
                        f"http://127.0.0.1:{agent_port}", "/invoke", delivery(capability), None
                    )
                    targets[f"coord {name}"] = Target(
                        coordinator, "/v1/invoke", invoke(capability), admin
                    )
                runs.append(measure(targets, args.requests))
                print(
                    f"repeat {repeat + 1}: "
                    + ", ".join(f"{k} p50 {v['p50_ms']:.3f} ms" for k, v in runs[-1].items()),
                    flush=True,
                )
    report(runs, args)


def report(runs: list[dict[str, dict[str, float]]], args: argparse.Namespace) -> None:
    def median(key: str, field: str) -> float:
        return statistics.median(run[key][field] for run in runs)

    load = os.getloadavg()[0]
    print(
        f"\n{args.requests} requests per target and repeat, medians of {len(runs)}; "
        f"load average {load:.2f}"
    )
    print(f"{'target':<20}{'p50 ms':>10}{'p99 ms':>10}")
    for key in runs[0]:
        print(f"{key:<20}{median(key, 'p50_ms'):>10.3f}{median(key, 'p99_ms'):>10.3f}")
    summary = {}
    for way in ("direct", "coord"):
        added = {
            sdk: statistics.median(
                r[f"{way} {sdk}"]["p50_ms"] - r[f"{way} bare"]["p50_ms"] for r in runs
            )
            for sdk in ("python-sdk", "ts-sdk")
        }
        ratio = added["ts-sdk"] / added["python-sdk"] if added["python-sdk"] > 0 else float("nan")
        verdict = "met" if ratio <= GOAL_RATIO else "missed"
        print(
            f"{way}: added p50 per delivery: Python SDK {added['python-sdk']:+.3f} ms, "
            f"TypeScript SDK {added['ts-sdk']:+.3f} ms; "
            f"TS/Python {ratio:.2f} (goal <= {GOAL_RATIO}: {verdict})"
        )
        summary[way] = {**added, "ratio": ratio}
    if args.json is not None:
        args.json.write_text(
            json.dumps({"runs": runs, "summary": summary, "load_average": load}, indent=2)
        )


if __name__ == "__main__":
    main()
