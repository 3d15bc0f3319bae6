"""Big answers and the coordinator's memory: does RSS come back down after them?

    .venv/bin/python bench/memory.py [--answers 150] [--answer-mb 2] [--concurrency 4]
        [--settle-s 60] [--env NAME=VALUE ...] [--json out.json]

A real coordinator (`python -m agent_reach serve`, memory backend, security on) and a real
agent in its own process that answers every delivery with a *distinct* JSON body of
`--answer-mb` MB (one string of random hex under `blob`, so no two answers share bytes).
After registration and a few small warm-up invokes, the coordinator's RSS (VmRSS of
/proc/PID/status) is the start; `--answers` invokes then run, `--concurrency` at a time,
each answer read to the end by the client (timeout class `reasoning`: 5 s, as a
loaded machine may need); RSS is read right after the last answer, and
every 5 s for `--settle-s` seconds after it. Growth is RSS minus the start, in MB (10^6
bytes). `--env` passes settings (or MALLOC_* tunables) to the coordinator only.
Linux only (it reads /proc).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from agent_reach.testing.agent_process import CoordinatorProcess
from agent_reach.testing.ports import free_port

SAMPLE_S = 5.0
WARM_UP = 5
START_TIMEOUT_S = 60.0  # a loaded machine starts it slowly
_HEALTHY = b'HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n{"status":"ok"}'


async def serve_agent(port: int, answer_bytes: int) -> None:
    """The agent: `GET /health` answers ok, any POST a distinct body of `answer_bytes`."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                if length:
                    await reader.readexactly(length)
                if head.startswith(b"GET"):
                    writer.write(_HEALTHY)
                else:
                    small = b"small" in head.split(b"\r\n", 1)[0]
                    size = 64 if small else answer_bytes
                    body = b'{"blob":"%s"}' % os.urandom(size // 2).hex().encode()
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                    )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / 1e6
    raise RuntimeError(f"no VmRSS for process {pid}")


async def invoke_all(url: str, key: str, capability: str, count: int, concurrency: int) -> int:
    """`count` invokes, `concurrency` at a time; the bytes of answers read."""
    limit = asyncio.Semaphore(concurrency)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:

        async def one() -> int:
            async with limit:
                response = await client.post(
                    "/v1/invoke",
                    json={"capability": capability, "payload": {}, "timeout_class": "reasoning"},
                )
                if response.status_code != 200:
                    raise RuntimeError(f"invoke answered {response.status_code}: {response.text}")
                return len(response.content)

        return sum(await asyncio.gather(*(one() for _ in range(count))))


def run(args: argparse.Namespace) -> dict[str, object]:
    agent_port = free_port()
    agent_process = subprocess.Popen(
        [sys.executable, __file__, "--agent", str(agent_port), "--answer-mb", str(args.answer_mb)]
    )
    admin_key = secrets.token_urlsafe(24)
    env = dict(item.split("=", 1) for item in args.env)
    with tempfile.TemporaryDirectory() as tmp:
        coordinator = CoordinatorProcess(
            directory=Path(tmp),
            extra_env={"AR_AUTH": "on", "AR_ADMIN_KEY": admin_key, **env},
        )
        try:
            coordinator.launch().wait_ready(START_TIMEOUT_S)
            assert coordinator.pid is not None
            headers = {"Authorization": f"Bearer {admin_key}"}
            with httpx.Client(base_url=coordinator.url, headers=headers, timeout=30) as http:
                for capability, path in (("big.answer", "/invoke"), ("small.answer", "/small")):
                    body = {
                        "id": capability.replace(".", "-"),
                        "capabilities": [capability],
                        "transport": {"endpoint": f"http://127.0.0.1:{agent_port}{path}"},
                    }
                    response = http.post("/v1/agents", json=body)
                    response.raise_for_status()
            asyncio.run(invoke_all(coordinator.url, admin_key, "small.answer", WARM_UP, 1))
            time.sleep(1.0)
            start = rss_mb(coordinator.pid)
            began = time.perf_counter()
            read = asyncio.run(
                invoke_all(coordinator.url, admin_key, "big.answer", args.answers, args.concurrency)
            )
            seconds = time.perf_counter() - began
            after = rss_mb(coordinator.pid)
            settle = []
            for n in range(1, int(args.settle_s / SAMPLE_S) + 1):
                time.sleep(SAMPLE_S)
                settle.append((n * SAMPLE_S, rss_mb(coordinator.pid)))
        finally:
            coordinator.stop()
            agent_process.terminate()
            agent_process.wait()
    return {
        "answers": args.answers,
        "answer_mb": args.answer_mb,
        "concurrency": args.concurrency,
        "env": env,
        "bytes_read": read,
        "seconds": round(seconds, 2),
        "rss_start_mb": round(start, 1),
        "rss_after_mb": round(after, 1),
        "growth_after_mb": round(after - start, 1),
        "settle": [(s, round(mb, 1)) for s, mb in settle],
        "growth_settled_mb": round(settle[-1][1] - start, 1) if settle else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=150)
    parser.add_argument("--answer-mb", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--settle-s", type=float, default=60.0)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--agent", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.agent:
        asyncio.run(serve_agent(args.agent, int(args.answer_mb * 1e6)))
        return
    figures = run(args)
    print(
        f"{figures['answers']} distinct {figures['answer_mb']} MB answers, "
        f"{figures['concurrency']} at a time, in {figures['seconds']} s; env {figures['env']}"
    )
    print(f"RSS at start        {figures['rss_start_mb']:>8} MB")
    print(
        f"RSS after the last  {figures['rss_after_mb']:>8} MB  (+{figures['growth_after_mb']} MB)"
    )
    start = float(figures["rss_start_mb"])  # type: ignore[arg-type]
    for seconds, mb in figures["settle"]:  # type: ignore[attr-defined]
        print(f"RSS {seconds:>4.0f} s later     {mb:>8} MB  (+{round(mb - start, 1)} MB)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
