"""What one hop through the coordinator costs, next to a direct call and nginx.

    .venv/bin/python bench/overhead.py [--duration 10] [--concurrency 1,16,64] [--json out.json]

Starts the echo agent (`bench/echo_agent.py`), nginx as a keep-alive reverse
proxy to it, and the coordinator (`python -m agent_reach serve`, in-memory
registry) with the echo agent registered; then drives each target with
`wrk -t1` and a 148-byte JSON POST at each concurrency, all in one run:

  (a) direct   POST agent/invoke
  (b) nginx    POST nginx/invoke -> agent
  (c) coord    POST coordinator/v1/invoke {"capability": "echo", ...} -> agent
  (d) floor    POST floor/v1/invoke, the same body -> agent

The floor (`bench/relay_floor.py`, left out with `--no-floor`, and with `--tls` or
`--workers` > 1) is the least a process on the coordinator's stack (asyncio on uvloop,
httptools, orjson) can do for the same hop: parse, look the capability up in one dict,
forward over a kept-alive connection, parse the answer, wrap it in the coordinator's
envelope. No coordinator of this stack gets under its CPU per request; f/b says how
close to nginx one can get at all, c/f how much of that the coordinator keeps.

wrk runs on CPU 0, every server on CPU 1. With `--workers N` the coordinator runs as
`serve --workers N` on the Redis backend (a private redis-server) and nginx with
`worker_processes N`; nothing is pinned then, so on a 2-core machine wrk shares the
cores with the servers.
Each repeat runs every target once, one after the other, so each repeat's ratios
come from runs seconds apart: on a shared machine the coordinator's cost drifts by
tens of per cent within minutes while nginx's barely moves. Prints a table with the
medians of req/s, p50/p99 and server CPU per request, the ratios c/a and c/b (medians
of each repeat's own ratio; c/b of every repeat too), the p50 the coordinator adds,
and the goals (+0.3 ms p50 at c=1; >= 20% of nginx's req/s with p99 < 20 ms at c=64);
with the floor, f/b, the p50 it adds, c/f and the CPU per request the coordinator
spends above it. `--json` writes it all, every run included.

`--tls` runs every hop over TLS, with certificates of a private CA made for the run:
wrk speaks HTTPS to each target, the echo agent serves HTTPS, nginx terminates TLS and
proxies to the agent over TLS (verifying it, keep-alive upstream), and the coordinator
serves HTTPS (AR_TLS_CERT) and delivers to the https agent verified against
AR_AGENT_CA_FILE; c/b is then the coordinator's TLS throughput over nginx's.
Needs Debian's nginx and wrk: `apt-get install -y nginx wrk`.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import platform
import secrets
import shlex
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from agent_reach.testing.redis_server import RedisServer

REPO = Path(__file__).resolve().parents[1]
NGINX = "/usr/sbin/nginx"
INSTALL_HINT = "apt-get install -y nginx wrk"
DEFAULT_COORDINATOR_CMD = "{python} -m agent_reach serve --host 127.0.0.1 --port {port}"
# The overhead goals on this 2-core machine (README, "Performance"): at most this much added
# p50 at one connection; at 64, this share of nginx's req/s with p99 under this bound.
GOAL_ADDED_P50_MS_AT_C1 = 0.3
GOAL_NGINX_SHARE_AT_C64 = 0.20
GOAL_P99_MS_AT_C64 = 20.0
STARTUP_TIMEOUT_S = 20.0
WRK_CPU, SERVER_CPU = "0", "1"
AGENT_ID = "echo-1"
CAPABILITY = "echo"
# 148 bytes, a typical small invocation; the same bytes go to every target.
BODY = json.dumps(
    {
        "capability": CAPABILITY,
        "payload": {
            "order_id": "A-1029384",
            "user": "u-88231",
            "items": [{"sku": "SKU-778", "qty": 2}],
            "note": "is my parcel lost? it is late",
        },
    },
    separators=(",", ":"),
)
WRK_SCRIPT = """\
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %s"
wrk.body = %s

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK_JSON {\\"requests\\":%%d,\\"duration_us\\":%%d,\\"errors\\":%%d,"
      .. "\\"bad_status\\":%%d,\\"p50_us\\":%%.1f,\\"p99_us\\":%%.1f,\\"max_us\\":%%.1f}\\n",
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99), latency.max))
end
"""
# Security as deployed: the caller may invoke `echo`, the agent may register it, and a
# quota far above the load keeps the token bucket on the hot path without refusing.
BENCH_POLICY = """\
[[access.invoke]]
principals = ["name:bench-caller"]
capabilities = ["echo"]

[[access.register]]
principals = ["name:echo-agent"]
capabilities = ["echo"]
"""
BENCH_QUOTA = """
[[quotas]]
principals = ["name:bench-caller"]
capabilities = ["echo"]
rate_per_s = 1000000.0
burst = 1000000
"""
NGINX_CONF = """\
daemon off;
worker_processes {workers};
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/client_body;
  proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fastcgi;
  uwsgi_temp_path {tmp}/uwsgi;
  scgi_temp_path {tmp}/scgi;
  keepalive_requests 100000000;
  upstream agent {{
    server 127.0.0.1:{agent_port};
    keepalive 256;
    keepalive_requests 100000000;
  }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://agent;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }}
  }}
}}
"""
# The same proxy with TLS on both sides: in from wrk, out to the https echo agent.
NGINX_TLS = {
    "listen 127.0.0.1:{port};": "listen 127.0.0.1:{port} ssl;\n"
    "    ssl_certificate {cert};\n"
    "    ssl_certificate_key {key};",
    "proxy_pass http://agent;": "proxy_pass https://agent;\n"
    "      proxy_ssl_verify on;\n"
    "      proxy_ssl_trusted_certificate {ca};\n"
    "      proxy_ssl_name localhost;\n"
    "      proxy_ssl_session_reuse on;",
}


def nginx_conf(tls: bool) -> str:
    """nginx's config template, with TLS in and out when asked."""
    conf = NGINX_CONF
    if tls:
        for plain, secured in NGINX_TLS.items():
            conf = conf.replace(plain, secured)
    return conf


@dataclass(frozen=True)
class TlsFiles:
    """A private CA and one certificate for 127.0.0.1 and localhost, as PEM files: every
    server of the run presents it, every client trusts the CA."""

    ca: Path
    cert: Path
    key: Path

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))


def make_tls_files(directory: Path) -> TlsFiles:
    """The run's CA and certificate in `directory` (trustme: the test extra)."""
    import trustme

    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    files = TlsFiles(directory / "ca.pem", directory / "cert.pem", directory / "key.pem")
    ca.cert_pem.write_to_path(str(files.ca))
    leaf.cert_chain_pems[0].write_to_path(str(files.cert))
    leaf.private_key_pem.write_to_path(str(files.key))
    return files


Process = subprocess.Popen[bytes]


class BenchError(Exception):
    """A precondition failed; the message says what to do."""


@dataclass
class Result:
    target: str
    concurrency: int
    rps: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    errors: int
    bad_status: int
    cpu_us_per_req: float
    repeat: int = 0


@dataclass
class Ratio:
    """The coordinator against the direct call and nginx at one concurrency."""

    concurrency: int
    coordinator_over_direct: float
    coordinator_over_nginx: float
    added_p50_ms: float
    coordinator_p99_ms: float
    goal_met: bool | None  # None where no goal is set for this concurrency
    nginx_share_runs: list[float]  # c/b of each repeat, in order
    floor: FloorRatio | None = None  # when the floor ran


@dataclass
class FloorRatio:
    """The floor (f) against nginx, and the coordinator against the floor."""

    floor_over_nginx: float
    floor_added_p50_ms: float
    coordinator_over_floor: float
    coordinator_cpu_over_floor_us: float  # c's CPU per request minus f's
    floor_share_runs: list[float]  # f/b of each repeat, in order


@dataclass
class Target:
    name: str
    url: str
    pid: int  # the server under test; its whole process tree is charged


def main() -> None:
    args = parse_args()
    for tool in (NGINX, "wrk", "taskset"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is missing; install it with: {INSTALL_HINT}")
    console = Console()
    try:
        runs = run(args, console)
    except BenchError as exc:
        sys.exit(f"error: {exc}")
    results = medians(runs)
    summary = summarize(runs)
    render(console, results, summary, args.workers, args.tls)
    if args.json:
        report = {
            "config": {
                "duration_s": args.duration,
                "concurrency": args.concurrency,
                "repeat": args.repeat,
                "body_bytes": len(BODY),
                "coordinator_cmd": args.coordinator_cmd,
                "workers": args.workers,
                "security": "keys, access rules" + ("" if args.no_quota else ", a quota"),
                "tls": args.tls,
                "floor": floor_runs(args),
            },
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
            "results": [asdict(r) for r in results],
            "summary": [asdict(s) for s in summary],
            "runs": [asdict(r) for r in runs],
        }
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
        console.print(f"wrote {args.json}")


def run(args: argparse.Namespace, console: Console) -> list[Result]:
    """Every run of every target, each with its repeat number."""
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ar-bench-")))
        targets, script = stack.enter_context(servers(args, tmp))
        return measure(args, targets, script, console)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Coordinator overhead vs a direct call and nginx, measured with wrk."
    )
    parser.add_argument("--duration", type=int, default=10, help="whole seconds per point")
    parser.add_argument(
        "--concurrency",
        type=lambda s: [int(c) for c in s.split(",")],
        default=[1, 16, 64],
        help="comma-separated connection counts (default 1,16,64)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per point; medians are kept")
    parser.add_argument(
        "--warmup", type=int, default=2, help="whole seconds of load per target first"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="coordinator worker processes (Redis backend) against nginx worker_processes",
    )
    parser.add_argument(
        "--no-quota",
        action="store_true",
        help="leave the quota out of the policy (on Redis it is one EVALSHA per request)",
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        help="every hop over TLS: into each target and from nginx and the coordinator to the agent",
    )
    parser.add_argument(
        "--no-floor",
        action="store_true",
        help="leave out the floor (bench/relay_floor.py): the least hop of the coordinator's stack",
    )
    parser.add_argument("--json", help="write the results to this file")
    parser.add_argument(
        "--profile",
        help="sample the coordinator with py-spy during its run at the top concurrency and "
        "write the flat profile (py-spy's raw format) here; needs `pip install py-spy`",
    )
    # Any server can stand in for the coordinator: {python}, {port} and {repo} are filled in.
    parser.add_argument(
        "--coordinator-cmd", default=DEFAULT_COORDINATOR_CMD, help=argparse.SUPPRESS
    )
    return parser.parse_args()


def floor_runs(args: argparse.Namespace) -> bool:
    """Whether the floor is measured: plain HTTP and one process only, as it serves."""
    return not args.no_floor and not args.tls and args.workers == 1


@contextlib.contextmanager
def servers(args: argparse.Namespace, tmp: Path) -> Iterator[tuple[list[Target], Path]]:
    """Start agent, nginx and coordinator pinned to SERVER_CPU; stop them on exit."""
    procs: list[Process] = []

    cpus = server_cpus(args.workers)
    redis_server: RedisServer | None = None

    def start(name: str, cmd: list[str], env: dict[str, str] | None = None) -> Process:
        with (tmp / f"{name}.log").open("wb") as log:
            proc = subprocess.Popen(
                ["taskset", "-c", cpus, *cmd], stdout=log, stderr=subprocess.STDOUT, env=env
            )
        procs.append(proc)
        return proc

    try:
        agent_port, nginx_port, coord_port, floor_port = free_ports(4)
        tls = make_tls_files(tmp) if args.tls else None
        context = None if tls is None else tls.client_context()
        scheme = "http" if tls is None else "https"
        echo_agent = str(REPO / "bench" / "echo_agent.py")
        agent_cmd = [sys.executable, echo_agent, "--port", str(agent_port)]
        if tls is not None:
            agent_cmd += ["--tls-cert", str(tls.cert), "--tls-key", str(tls.key)]
        agent = start("agent", agent_cmd)
        wait_healthy("echo agent", agent, agent_port, "/health", tmp / "agent.log", tls=context)

        conf = tmp / "nginx.conf"
        files = {} if tls is None else {"ca": tls.ca, "cert": tls.cert, "key": tls.key}
        conf.write_text(
            nginx_conf(tls is not None).format(
                tmp=tmp, agent_port=agent_port, port=nginx_port, workers=args.workers, **files
            )
        )
        error_log = str(tmp / "nginx-error.log")
        nginx = start("nginx", [NGINX, "-p", str(tmp), "-e", error_log, "-c", str(conf)])
        wait_healthy("nginx", nginx, nginx_port, "/health", tmp / "nginx-error.log", tls=context)

        # The embedded default as deployed: security on (API keys, access rules, a
        # quota), the decision log written to a file, tracing on.
        admin_key = secrets.token_urlsafe(32)
        policy = tmp / "policy.toml"
        policy.write_text(BENCH_POLICY + ("" if args.no_quota else BENCH_QUOTA))
        env = dict(
            os.environ,
            AR_REGISTRY_BACKEND="memory",
            AR_AUTH="on",
            AR_ADMIN_KEY=admin_key,
            AR_POLICY_FILE=str(policy),
            AR_DECISION_LOG=str(tmp / "decisions.jsonl"),
        )
        if tls is not None:
            env.update(
                AR_TLS_CERT=str(tls.cert), AR_TLS_KEY=str(tls.key), AR_AGENT_CA_FILE=str(tls.ca)
            )
        if args.workers > 1:  # workers share their state through Redis
            redis_url = os.environ.get("AR_REDIS_URL")
            if redis_url is None:
                redis_server = RedisServer().start()
                redis_url = redis_server.url
            env.update(
                AR_REGISTRY_BACKEND="redis",
                AR_REDIS_URL=redis_url,
                AR_REDIS_PREFIX=f"bench-{secrets.token_hex(4)}",
            )
        # The checkout's own source first, so an uninstalled tree is benchmarked as it is.
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(REPO / "src"), env.get("PYTHONPATH")])
        )
        cmd = args.coordinator_cmd.format(python=sys.executable, port=coord_port, repo=REPO)
        if args.workers > 1:
            cmd += f" --workers {args.workers}"
        coord = start("coordinator", shlex.split(cmd), env)
        coord_log = tmp / "coordinator.log"
        wait_healthy("coordinator", coord, coord_port, "/healthz", coord_log, cmd, context)
        caller_key = register_agent(coord_port, agent_port, admin_key, context)

        targets = [
            Target("direct", f"{scheme}://127.0.0.1:{agent_port}/invoke", agent.pid),
            Target("nginx", f"{scheme}://127.0.0.1:{nginx_port}/invoke", nginx.pid),
            Target("coordinator", f"{scheme}://127.0.0.1:{coord_port}/v1/invoke", coord.pid),
        ]
        if floor_runs(args):
            route = f"{CAPABILITY}={AGENT_ID}@http://127.0.0.1:{agent_port}/invoke"
            relay = str(REPO / "bench" / "relay_floor.py")
            floor_cmd = [sys.executable, relay, "--port", str(floor_port), "--route", route]
            floor = start("floor", floor_cmd)
            wait_healthy("floor", floor, floor_port, "/health", tmp / "floor.log")
            targets.append(Target("floor", f"http://127.0.0.1:{floor_port}/v1/invoke", floor.pid))
        script = tmp / "post.lua"
        script.write_text(WRK_SCRIPT % (caller_key, json.dumps(BODY)))
        yield targets, script
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in reversed(procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if redis_server is not None:
            redis_server.close()


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def http_call(
    port: int,
    method: str,
    path: str,
    body: str | None = None,
    key: str | None = None,
    tls: ssl.SSLContext | None = None,
) -> tuple[int, bytes]:
    """One request to 127.0.0.1:`port`, over TLS with `tls`."""
    conn = (
        http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        if tls is None
        else http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=tls)
    )
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def wait_healthy(
    name: str,
    proc: Process,
    port: int,
    path: str,
    log: Path,
    cmd: str = "",
    tls: ssl.SSLContext | None = None,
) -> None:
    """Poll GET `path` until it answers 200; fail with the process's last output otherwise."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(OSError, http.client.HTTPException):
            if http_call(port, "GET", path, tls=tls)[0] == 200:
                return
        time.sleep(0.05)
    if proc.poll() is not None:
        what = f"exited with code {proc.returncode} before answering GET {path}"
    else:
        what = f"did not answer GET {path} with 200 within {STARTUP_TIMEOUT_S:g} s"
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    command = f"command: {cmd}\n" if cmd else ""
    raise BenchError(f"{name} on 127.0.0.1:{port} {what}.\n{command}last output:\n{tail}")


def register_agent(
    coord_port: int, agent_port: int, admin_key: str, tls: ssl.SSLContext | None = None
) -> str:
    """Mint the agent's and the caller's keys, register the echo agent (at an https
    endpoint with `tls`), invoke it once; the caller's key."""
    keys = {}
    for principal, role in (("echo-agent", "agent"), ("bench-caller", "caller")):
        request = {"principal": principal, "domain": "bench", "role": role}
        status, body = http_call(
            coord_port, "POST", "/v1/keys", json.dumps(request), admin_key, tls
        )
        if status != 201:
            raise BenchError(f"minting a key answered {status}: {body[:500]!r}")
        keys[role] = json.loads(body)["key"]
    registration = {
        "id": AGENT_ID,
        "capabilities": [CAPABILITY],
        "transport": {
            "type": "http",
            "endpoint": f"{'http' if tls is None else 'https'}://127.0.0.1:{agent_port}/invoke",
        },
        "ttl": 3600,
    }
    status, body = http_call(
        coord_port, "POST", "/v1/agents", json.dumps(registration), keys["agent"], tls
    )
    if not 200 <= status < 300:
        raise BenchError(f"registering the echo agent answered {status}: {body[:500]!r}")
    status, body = http_call(coord_port, "POST", "/v1/invoke", BODY, keys["caller"], tls)
    if not 200 <= status < 300:
        raise BenchError(f"a first POST /v1/invoke answered {status}: {body[:500]!r}")
    return keys["caller"]


def measure(
    args: argparse.Namespace, targets: list[Target], script: Path, console: Console
) -> list[Result]:
    top = max(args.concurrency)
    for target in targets:
        if args.warmup > 0:
            run_wrk(target, top, args.warmup, script, args.workers)
    runs = []
    for concurrency in args.concurrency:
        for repeat in range(args.repeat):
            for target in targets:
                profiling = (
                    args.profile and target.name == "coordinator" and concurrency == top
                ) and repeat == 0
                sampler = (
                    start_sampler(target.pid, args.duration, args.profile) if profiling else None
                )
                result = run_wrk(target, concurrency, args.duration, script, args.workers)
                if sampler is not None:
                    sampler.wait()
                result.repeat = repeat
                console.print(
                    f"c={concurrency:<3} #{repeat + 1} {target.name:<12} {result.rps:>10,.0f} "
                    f"req/s  p50 {result.p50_ms:.3f} ms  p99 {result.p99_ms:.3f} ms"
                )
                runs.append(result)
    return runs


def start_sampler(pid: int, duration_s: int, out: str) -> Process:
    """py-spy sampling `pid` for `duration_s` into `out` (collapsed stacks)."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    cmd = [py_spy, "record", "-p", str(pid), "-d", str(duration_s), "-r", "200"]
    cmd += ["-f", "raw", "-o", out, "--nonblocking"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def server_cpus(workers: int) -> str:
    """Where the servers run: one core of their own, or every core with several workers."""
    return SERVER_CPU if workers == 1 else f"0-{(os.cpu_count() or 2) - 1}"


def run_wrk(
    target: Target, concurrency: int, duration_s: int, script: Path, workers: int = 1
) -> Result:
    cpus = WRK_CPU if workers == 1 else server_cpus(workers)
    cmd = ["taskset", "-c", cpus, "wrk", "-t1", f"-c{concurrency}", f"-d{duration_s}s"]
    cmd += ["--timeout", "5s", "-s", str(script), target.url]
    cpu_before = tree_cpu_s(target.pid)
    completed = subprocess.run(cmd, capture_output=True, text=True, check=False)
    cpu_used = tree_cpu_s(target.pid) - cpu_before
    line = next((x for x in completed.stdout.splitlines() if x.startswith("WRK_JSON ")), None)
    if completed.returncode != 0 or line is None:
        raise BenchError(f"wrk failed on {target.url}:\n{completed.stdout}{completed.stderr}")
    data = json.loads(line.removeprefix("WRK_JSON "))
    requests = max(data["requests"], 1)
    return Result(
        target=target.name,
        concurrency=concurrency,
        rps=data["requests"] / (data["duration_us"] / 1e6),
        p50_ms=data["p50_us"] / 1000,
        p99_ms=data["p99_us"] / 1000,
        max_ms=data["max_us"] / 1000,
        errors=data["errors"],
        bad_status=data["bad_status"],
        cpu_us_per_req=cpu_used * 1e6 / requests,
    )


def medians(runs: list[Result]) -> list[Result]:
    """One result per target and concurrency: the medians of its repeats."""
    grouped: dict[tuple[int, str], list[Result]] = {}
    for run in runs:
        grouped.setdefault((run.concurrency, run.target), []).append(run)
    return [median_result(group) for group in grouped.values()]


def median_result(runs: list[Result]) -> Result:
    def med(field: str) -> float:
        return float(statistics.median(getattr(run, field) for run in runs))

    first = runs[0]
    return Result(
        target=first.target,
        concurrency=first.concurrency,
        rps=med("rps"),
        p50_ms=med("p50_ms"),
        p99_ms=med("p99_ms"),
        max_ms=med("max_ms"),
        errors=sum(run.errors for run in runs),
        bad_status=sum(run.bad_status for run in runs),
        cpu_us_per_req=med("cpu_us_per_req"),
    )


def tree_cpu_s(root: int) -> float:
    """User+system CPU seconds of `root` and its descendants, from /proc."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        ticks[pid] = int(fields[11]) + int(fields[12])
    total, frontier = 0, [root]
    while frontier:
        pid = frontier.pop()
        total += ticks.get(pid, 0)
        frontier.extend(child for child, parent in parents.items() if parent == pid)
    return total / os.sysconf("SC_CLK_TCK")


def paired_ratios(
    runs: list[Result], concurrency: int, base: str, target: str = "coordinator"
) -> list[float]:
    """`target`'s req/s over `base`'s, repeat by repeat."""
    by_run = {(r.target, r.repeat): r for r in runs if r.concurrency == concurrency}
    repeats = sorted({repeat for _, repeat in by_run})
    return [by_run[(target, n)].rps / by_run[(base, n)].rps for n in repeats]


def summarize(runs: list[Result]) -> list[Ratio]:
    """Per concurrency: c/a and c/b throughput (medians of each repeat's ratio), added
    p50, the goals that apply, and the floor's figures when it ran."""
    by_key = {(r.target, r.concurrency): r for r in medians(runs)}
    rows = []
    for concurrency in sorted({r.concurrency for r in runs}):
        direct = by_key[("direct", concurrency)]
        coord = by_key[("coordinator", concurrency)]
        shares = paired_ratios(runs, concurrency, "nginx")
        added_p50 = coord.p50_ms - direct.p50_ms
        share = statistics.median(shares)
        goal: bool | None = None
        if concurrency == 1:
            goal = added_p50 <= GOAL_ADDED_P50_MS_AT_C1
        elif concurrency == 64:
            goal = share >= GOAL_NGINX_SHARE_AT_C64 and coord.p99_ms < GOAL_P99_MS_AT_C64
        rows.append(
            Ratio(
                concurrency,
                statistics.median(paired_ratios(runs, concurrency, "direct")),
                share,
                added_p50,
                coord.p99_ms,
                goal,
                [round(x, 4) for x in shares],
                floor_ratio(runs, concurrency, by_key),
            )
        )
    return rows


def floor_ratio(
    runs: list[Result], concurrency: int, by_key: dict[tuple[str, int], Result]
) -> FloorRatio | None:
    """f/b and c/f (medians of each repeat's ratio), the p50 the floor adds and the CPU
    per request the coordinator spends above it; None when the floor did not run."""
    floor = by_key.get(("floor", concurrency))
    if floor is None:
        return None
    shares = paired_ratios(runs, concurrency, "nginx", "floor")
    coord = by_key[("coordinator", concurrency)]
    return FloorRatio(
        statistics.median(shares),
        floor.p50_ms - by_key[("direct", concurrency)].p50_ms,
        statistics.median(paired_ratios(runs, concurrency, "floor")),
        coord.cpu_us_per_req - floor.cpu_us_per_req,
        [round(x, 4) for x in shares],
    )


def render(
    console: Console,
    results: list[Result],
    summary: list[Ratio],
    workers: int = 1,
    tls: bool = False,
) -> None:
    where = (
        "wrk -t1 on CPU 0, servers on CPU 1"
        if workers == 1
        else f"{workers} workers each (coordinator on Redis), wrk sharing the cores"
    )
    over = ", TLS in and out" if tls else ""
    table = Table(title=f"one hop{over}, {len(BODY)}-byte JSON POST, {where}")
    for column in ("c", "target", "req/s", "p50 ms", "p99 ms", "server CPU µs/req", "errors"):
        table.add_column(column, justify="left" if column == "target" else "right")
    for r in results:
        errors = f"{r.errors} + {r.bad_status} HTTP>=400" if r.errors or r.bad_status else "0"
        table.add_row(
            str(r.concurrency),
            r.target,
            f"{r.rps:,.0f}",
            f"{r.p50_ms:.3f}",
            f"{r.p99_ms:.3f}",
            f"{r.cpu_us_per_req:.0f}",
            errors,
        )
    console.print(table)
    ratios = Table(title="coordinator (c) against direct (a) and nginx (b)")
    columns = ("c", "c/a req/s", "c/b req/s", "c/b each repeat", "added p50 ms (c-a)")
    for column in (*columns, "c p99 ms", "goal"):
        ratios.add_column(column, justify="right")
    for row in summary:
        ratios.add_row(
            str(row.concurrency),
            f"{row.coordinator_over_direct:.2f}",
            f"{row.coordinator_over_nginx:.2f}",
            " ".join(f"{x:.2f}" for x in row.nginx_share_runs),
            f"{row.added_p50_ms:+.3f}",
            f"{row.coordinator_p99_ms:.2f}",
            {None: "-", True: "met", False: "MISSED"}[row.goal_met],
        )
    console.print(ratios)
    render_floor(console, summary)
    console.print(
        f"goals: c=1 adds at most {GOAL_ADDED_P50_MS_AT_C1} ms p50; c=64 reaches "
        f"{GOAL_NGINX_SHARE_AT_C64:.0%} of nginx's req/s with p99 < {GOAL_P99_MS_AT_C64:g} ms"
    )


def render_floor(console: Console, summary: list[Ratio]) -> None:
    """The floor's table, when it ran."""
    rows = [(row.concurrency, row.floor) for row in summary if row.floor is not None]
    if not rows:
        return
    table = Table(title="floor (f, bench/relay_floor.py) against nginx (b); coordinator (c)")
    columns = ("c", "f/b req/s", "f/b each repeat", "added p50 ms (f-a)", "c/f req/s")
    for column in (*columns, "c-f CPU µs/req"):
        table.add_column(column, justify="right")
    for concurrency, floor in rows:
        table.add_row(
            str(concurrency),
            f"{floor.floor_over_nginx:.2f}",
            " ".join(f"{x:.2f}" for x in floor.floor_share_runs),
            f"{floor.floor_added_p50_ms:+.3f}",
            f"{floor.coordinator_over_floor:.2f}",
            f"{floor.coordinator_cpu_over_floor_us:+.0f}",
        )
    console.print(table)


if __name__ == "__main__":
    main()
