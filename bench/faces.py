"""CPU per request of the A2A and MCP faces next to `/v1/invoke`: the same delivery to
the same agent, measured with wrk in one run.

    .venv/bin/python bench/faces.py [--duration 5] [--concurrency 1,64] [--json out.json]

The setup of `bench/overhead.py` (its helpers): the echo agent and the coordinator as
deployed (keys, access rules, a quota, the decision log, tracing; memory backend), each
server pinned to CPU 1, wrk to CPU 0. Each target is one POST that delivers `echo` once:

  /v1/invoke             {"capability": "echo", "payload": ...}
  /a2a                   JSON-RPC SendMessage, `metadata.capability` echo, a data part
                         (answered with a completed Task, kept for GetTask/ListTasks)
  /a2a (a Message asked) the same with `metadata.reply: "message"`: no Task kept
  /a2a/message:send      the HTTP+JSON binding's SendMessage, the same message
  /mcp (2026-07-28)      tools/call `echo`, the per-request envelope (no session)
  /mcp (session)         tools/call `echo` in a 2025-11-25 session (Mcp-Session-Id)

Every A2A message has its own messageId and every MCP call its own JSON-RPC id (a wrk
`request` function numbers them), so each is a fresh delivery, never an idempotent
replay. Each target is checked once before its runs (200 and the echo's answer in the
body); wrk counts any non-2xx. Prints req/s, p50/p99 and the coordinator's CPU per
request (user + system, from /proc) per target and concurrency, and each face's CPU
over `/v1/invoke`'s at the same concurrency (the goal: at most 1.5).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from overhead import (
    AGENT_ID,
    BENCH_POLICY,
    BENCH_QUOTA,
    BODY,
    REPO,
    Process,
    Result,
    Target,
    free_ports,
    register_agent,
    run_wrk,
    wait_healthy,
)

GOAL_CPU_RATIO = 1.5  # issue 30: a face costs at most 1.5x /v1/invoke's CPU per request
PAYLOAD = json.loads(BODY)["payload"]
HANDSHAKE_VERSION, MODERN_VERSION = "2025-11-25", "2026-07-28"
COMPLETED = b'"TASK_STATE_COMPLETED"'  # a send's answer: a completed Task
COUNTER = "__N__"  # where the wrk script writes the request's number
NUMBERED = """\
local pre, post = %s, %s
local n = 0
request = function()
  n = n + 1
  return wrk.format(nil, nil, nil, pre .. n .. post)
end"""
# wrk: fixed headers, a body numbered per request (`pre .. n .. post`), the summary as JSON
WRK_SCRIPT = """\
wrk.method = "POST"
%(headers)s
%(body)s

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK_JSON {\\"requests\\":%%d,\\"duration_us\\":%%d,\\"errors\\":%%d,"
      .. "\\"bad_status\\":%%d,\\"p50_us\\":%%.1f,\\"p99_us\\":%%.1f,\\"max_us\\":%%.1f}\\n",
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99), latency.max))
end
"""


@dataclass
class Face:
    """One target: its path, headers and body (with `COUNTER` where the number goes), and
    what its answer must contain."""

    name: str
    path: str
    headers: dict[str, str]
    body: str
    expect: bytes
    runs: list[Result] = field(default_factory=list)

    def numbered(self, prefix: str, n: int | str) -> str:
        return self.body.replace(COUNTER, f"{prefix}{n}")


def faces(key: str, session: str) -> list[Face]:
    """The six targets, authenticated with the caller's `key`; `session` is the
    2025-11-25 MCP session the session target calls in."""
    auth = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    message = {
        "messageId": COUNTER,
        "role": "ROLE_USER",
        "parts": [{"data": PAYLOAD}],
        "metadata": {"capability": "echo"},
    }
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    asking = {**message, "metadata": {"capability": "echo", "reply": "message"}}
    as_message = {**rpc, "params": {"message": asking}}  # no Task kept: no store write
    mcp_accept = {"Accept": "application/json, text/event-stream"}
    call = {"name": "echo", "arguments": {"payload": PAYLOAD}}
    modern_meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    }
    modern = {**call, "_meta": modern_meta}
    return [
        Face("/v1/invoke", "/v1/invoke", auth, BODY, b'"ok"'),
        Face("/a2a", "/a2a", {**auth, "A2A-Version": "1.0"}, _json(rpc), COMPLETED),
        Face(
            "/a2a (a Message asked)",
            "/a2a",
            {**auth, "A2A-Version": "1.0"},
            _json(as_message),
            b'"message"',
        ),
        Face(
            "/a2a/message:send",
            "/a2a/message:send",
            {**auth, "A2A-Version": "1.0"},
            _json({"message": message}),
            COMPLETED,
        ),
        Face(
            f"/mcp ({MODERN_VERSION})",
            "/mcp",
            {
                **auth,
                **mcp_accept,
                "MCP-Protocol-Version": MODERN_VERSION,
                "Mcp-Method": "tools/call",
                "Mcp-Name": "echo",
            },
            _json({"jsonrpc": "2.0", "id": COUNTER, "method": "tools/call", "params": modern}),
            b'"pong"',
        ),
        Face(
            f"/mcp (session, {HANDSHAKE_VERSION})",
            "/mcp",
            {
                **auth,
                **mcp_accept,
                "MCP-Protocol-Version": HANDSHAKE_VERSION,
                "Mcp-Session-Id": session,
            },
            _json({"jsonrpc": "2.0", "id": COUNTER, "method": "tools/call", "params": call}),
            b'"pong"',
        ),
    ]


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def post(port: int, path: str, headers: dict[str, str], body: str) -> http.client.HTTPResponse:
    """One POST to the coordinator; the response, read."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", path, body=body.encode(), headers=headers)
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def open_session(port: int, key: str) -> str:
    """A 2025-11-25 MCP session as a client opens one: initialize, initialized, tools/list."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {key}",
    }
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
    response = post(port, "/mcp", headers, _json(init))
    session = response.getheader("mcp-session-id")
    if response.status != 200 or session is None:
        raise SystemExit(f"MCP initialize answered {response.status} without a session")
    headers |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": HANDSHAKE_VERSION}
    post(port, "/mcp", headers, _json({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    post(port, "/mcp", headers, _json({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    return session


def check(port: int, face: Face) -> None:
    """One request of `face`: it must answer 200 with the echo's answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(
        "POST", face.path, face.numbered(f"check-{secrets.token_hex(4)}-", 0), face.headers
    )
    response = conn.getresponse()
    body = response.read()
    conn.close()
    if response.status != 200 or face.expect not in body or b'"isError":true' in body:
        raise SystemExit(f"{face.name} answered {response.status}: {body[:600]!r}")


def script(tmp: Path, face: Face, run: str) -> Path:
    """The wrk script of one run of `face` (its numbers unique to the run)."""
    pre, counted, post_ = face.numbered(f"{run}-", COUNTER).partition(COUNTER)
    headers = "\n".join(
        f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in face.headers.items()
    )
    body = (
        NUMBERED % (json.dumps(pre), json.dumps(post_))
        if counted
        else f"wrk.body = {json.dumps(pre)}"
    )
    path = tmp / f"{run}.lua"
    path.write_text(WRK_SCRIPT % {"headers": headers, "body": body})
    return path


@contextlib.contextmanager
def coordinator(tmp: Path) -> Iterator[tuple[int, int, str]]:
    """The echo agent and the coordinator, pinned to CPU 1: (coordinator port, its pid,
    the caller's key)."""
    procs: list[Process] = []

    def start(name: str, cmd: list[str], env: dict[str, str] | None = None) -> Process:
        with (tmp / f"{name}.log").open("wb") as log:
            proc = subprocess.Popen(
                ["taskset", "-c", "1", *cmd], stdout=log, stderr=subprocess.STDOUT, env=env
            )
        procs.append(proc)
        return proc

    try:
        agent_port, port = free_ports(2)
        agent_cmd = [
            sys.executable,
            str(REPO / "bench" / "echo_agent.py"),
            "--port",
            str(agent_port),
        ]
        agent = start("agent", agent_cmd)
        wait_healthy("echo agent", agent, agent_port, "/health", tmp / "agent.log")
        admin_key = secrets.token_urlsafe(32)
        policy = tmp / "policy.toml"
        policy.write_text(BENCH_POLICY + BENCH_QUOTA)
        env = dict(
            os.environ,
            AR_REGISTRY_BACKEND="memory",
            AR_AUTH="on",
            AR_ADMIN_KEY=admin_key,
            AR_POLICY_FILE=str(policy),
            AR_DECISION_LOG=str(tmp / "decisions.jsonl"),
            PYTHONPATH=os.pathsep.join(
                filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])
            ),
        )
        cmd = [
            sys.executable,
            "-m",
            "agent_reach",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        coord = start("coordinator", cmd, env)
        wait_healthy("coordinator", coord, port, "/healthz", tmp / "coordinator.log", " ".join(cmd))
        yield port, coord.pid, register_agent(port, agent_port, admin_key)
    finally:
        for proc in reversed(procs):
            proc.terminate()
            proc.wait(timeout=15)


def measure(args: argparse.Namespace, tmp: Path, console: Console) -> list[Face]:
    with coordinator(tmp) as (port, pid, key):
        targets = faces(key, open_session(port, key))
        for face in targets:
            check(port, face)
            if args.warmup > 0:
                warm = Target(face.name, f"http://127.0.0.1:{port}{face.path}", pid)
                run_wrk(warm, max(args.concurrency), args.warmup, script(tmp, face, _run_id()))
        for concurrency in args.concurrency:
            for repeat in range(args.repeat):
                for face in targets:  # in turn: each repeat's figures come seconds apart
                    target = Target(face.name, f"http://127.0.0.1:{port}{face.path}", pid)
                    result = run_wrk(
                        target, concurrency, args.duration, script(tmp, face, _run_id())
                    )
                    result.repeat = repeat
                    face.runs.append(result)
                    cpu_ms = result.cpu_us_per_req / 1000
                    console.print(
                        f"c={concurrency:<3} #{repeat + 1} {face.name:<28} "
                        f"{result.rps:>8,.0f} req/s {cpu_ms:.3f} ms CPU/req"
                    )
    return targets


def _run_id() -> str:
    return f"bench-{secrets.token_hex(6)}"


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def summary(targets: list[Face], concurrency: list[int]) -> list[dict[str, object]]:
    """Per concurrency and face: medians of req/s, p50, p99, CPU per request; the CPU
    ratio to /v1/invoke's is the median of each repeat's own ratio."""
    invoke = targets[0]
    rows: list[dict[str, object]] = []
    for c in concurrency:
        base = {r.repeat: r for r in invoke.runs if r.concurrency == c}
        for face in targets:
            runs = [r for r in face.runs if r.concurrency == c]
            ratios = [r.cpu_us_per_req / base[r.repeat].cpu_us_per_req for r in runs]
            rows.append(
                {
                    "face": face.name,
                    "concurrency": c,
                    "rps": round(median([r.rps for r in runs]), 1),
                    "p50_ms": round(median([r.p50_ms for r in runs]), 3),
                    "p99_ms": round(median([r.p99_ms for r in runs]), 3),
                    "cpu_ms_per_request": round(median([r.cpu_us_per_req for r in runs]) / 1000, 3),
                    "cpu_over_invoke": round(median(ratios), 2),
                    "errors": sum(r.errors + r.bad_status for r in runs),
                }
            )
    return rows


def render(console: Console, rows: list[dict[str, object]]) -> None:
    table = Table(title="the same delivery through each face; wrk -t1 on CPU 0, servers on CPU 1")
    for column in (
        "c",
        "face",
        "req/s",
        "p50 ms",
        "p99 ms",
        "CPU ms/req",
        "CPU / invoke",
        "errors",
    ):
        table.add_column(column, justify="left" if column == "face" else "right")
    for row in rows:
        ratio = float(row["cpu_over_invoke"])  # type: ignore[arg-type]
        verdict = (
            ""
            if row["face"] == "/v1/invoke"
            else (" met" if ratio <= GOAL_CPU_RATIO else " MISSED")
        )
        table.add_row(
            str(row["concurrency"]),
            str(row["face"]),
            f"{row['rps']:,.0f}",
            f"{row['p50_ms']:.3f}",
            f"{row['p99_ms']:.3f}",
            f"{row['cpu_ms_per_request']:.3f}",
            f"{ratio:.2f}{verdict}",
            str(row["errors"]),
        )
    console.print(table)
    console.print(f"goal: each face at most {GOAL_CPU_RATIO}x /v1/invoke's CPU per request")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=5, help="whole seconds per point")
    parser.add_argument(
        "--concurrency",
        type=lambda s: [int(c) for c in s.split(",")],
        default=[1, 64],
        help="comma-separated connection counts (default 1,64)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per point; medians are kept")
    parser.add_argument(
        "--warmup", type=int, default=2, help="whole seconds of load per target first"
    )
    parser.add_argument("--json", type=Path, help="write the results to this file")
    args = parser.parse_args()
    for tool in ("wrk", "taskset"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is missing; install it with: apt-get install -y wrk")
    console = Console()
    with tempfile.TemporaryDirectory(prefix="ar-faces-") as tmp:
        targets = measure(args, Path(tmp), console)
    rows = summary(targets, args.concurrency)
    render(console, rows)
    if args.json:
        runs = [{**asdict(r), "face": f.name} for f in targets for r in f.runs]
        report = {"agent": AGENT_ID, "summary": rows, "runs": runs, "duration_s": args.duration}
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        console.print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
