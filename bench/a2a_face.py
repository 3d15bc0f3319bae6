"""CPU per request of an A2A message send: the coordinator's `/a2a` face, its `/v1/invoke`,
and the official a2a-sdk's own server handler (the question of issue 34: build the face
on the SDK's request handler and task store, or keep it hand-written?).

    .venv/bin/python bench/a2a_face.py [--requests 3000] [--concurrency 16] [--json FILE]

Three servers, each its own process, all pinned to CPU 1 (the load on CPU 0):
  - the coordinator (memory, keys off) with bench/echo_agent.py registered for `echo`:
    `POST /v1/invoke` and `POST /a2a` (`SendMessage`, `metadata.capability`), each a
    full delivery to the echo agent;
  - the a2a-sdk server as its docs build it (`DefaultRequestHandler`, `InMemoryTaskStore`,
    `create_jsonrpc_routes`, on uvicorn) with an executor that answers a fixed Message at
    once: no delivery at all, so it is the least a face built on the SDK would cost
    before it routes anything.
The same number of sends goes to each, from an httpx client at the given concurrency;
each server's CPU (user + system, from /proc) over the run, divided by the requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")
V1 = {"A2A-Version": "1.0", "content-type": "application/json"}


def sdk_app() -> Any:
    """The a2a-sdk reference server: its handler, task store and JSON-RPC routes."""
    from a2a.helpers.proto_helpers import new_text_message
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface
    from starlette.applications import Starlette

    class Echo(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            await event_queue.enqueue_event(new_text_message("pong"))

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            raise NotImplementedError

    card = AgentCard(
        name="echo",
        description="echo",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url="http://127.0.0.1/", protocol_binding="JSONRPC")],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )
    handler = DefaultRequestHandler(
        agent_executor=Echo(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")]
    return Starlette(routes=routes)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def wait_up(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url} did not come up")


def send_body(capability: bool) -> bytes:
    message: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"sku": "P-1", "qty": 1}}],
    }
    if capability:
        message["metadata"] = {"capability": "echo"}
    call = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    return json.dumps(call).encode()


INVOKE = json.dumps({"capability": "echo", "payload": {"sku": "P-1", "qty": 1}}).encode()


async def load(url: str, body: Any, requests: int, concurrency: int) -> float:
    """Send `requests` POSTs at `concurrency`; the seconds it took. `body()` makes each."""
    left = requests
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                answer = await client.post(url, content=body(), headers=V1)
                if answer.status_code != 200 or b'"error"' in answer.content[:200]:
                    raise SystemExit(f"{url} answered {answer.status_code}: {answer.text[:300]}")

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - start


def measure(pid: int, url: str, body: Any, args: argparse.Namespace) -> dict[str, float]:
    asyncio.run(load(url, body, args.warmup, args.concurrency))
    before = cpu_s(pid)
    elapsed = asyncio.run(load(url, body, args.requests, args.concurrency))
    used = cpu_s(pid) - before
    return {
        "cpu_ms_per_request": round(1000 * used / args.requests, 3),
        "requests_per_s": round(args.requests / elapsed, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--serve-sdk", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_sdk:
        import uvicorn

        uvicorn.run(sdk_app(), host="127.0.0.1", port=args.serve_sdk, log_level="warning")
        return
    os.sched_setaffinity(0, {0})
    pin = ["taskset", "-c", "1"]
    agent_port, coord_port, sdk_port = free_port(), free_port(), free_port()
    env = dict(os.environ, AR_AUTH="off", AR_DECISION_LOG="off", AR_REGISTRY_BACKEND="memory")
    env["PYTHONPATH"] = str(REPO / "src")
    procs = []
    with tempfile.TemporaryDirectory() as tmp, Path(tmp, "servers.log").open("wb") as log:
        try:
            agent_cmd = [sys.executable, str(REPO / "bench" / "echo_agent.py")]
            procs.append(
                subprocess.Popen(
                    [*pin, *agent_cmd, "--port", str(agent_port)], stdout=log, stderr=log
                )
            )
            coord_cmd = [sys.executable, "-m", "agent_reach", "serve", "--host", "127.0.0.1"]
            coord = subprocess.Popen(
                [*pin, *coord_cmd, "--port", str(coord_port)], env=env, stdout=log, stderr=log
            )
            sdk = subprocess.Popen(
                [*pin, sys.executable, __file__, "--serve-sdk", str(sdk_port)],
                stdout=log,
                stderr=log,
            )
            procs += [coord, sdk]
            base = f"http://127.0.0.1:{coord_port}"
            wait_up(f"{base}/healthz")
            wait_up(f"http://127.0.0.1:{sdk_port}/.well-known/agent-card.json")
            registered = httpx.post(
                f"{base}/v1/agents",
                json={
                    "id": "echo-1",
                    "capabilities": ["echo"],
                    "transport": {
                        "type": "http",
                        "endpoint": f"http://127.0.0.1:{agent_port}/invoke",
                    },
                    "ttl": 3600,
                },
            )
            registered.raise_for_status()
            results = {
                "coordinator /v1/invoke (delivers)": measure(
                    coord.pid, f"{base}/v1/invoke", lambda: INVOKE, args
                ),
                "coordinator /a2a SendMessage (delivers)": measure(
                    coord.pid, f"{base}/a2a", lambda: send_body(True), args
                ),
                "a2a-sdk DefaultRequestHandler (no delivery)": measure(
                    sdk.pid, f"http://127.0.0.1:{sdk_port}/", lambda: send_body(False), args
                ),
            }
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=15)
    print(f"{args.requests} sends at concurrency {args.concurrency}, servers on CPU 1:")
    for name, figures in results.items():
        cpu, rate = figures["cpu_ms_per_request"], figures["requests_per_s"]
        print(f"  {name:48} {cpu:7.3f} ms CPU/req  {rate:8.1f} req/s")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"concurrency": args.concurrency, "requests": args.requests, "results": results},
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
