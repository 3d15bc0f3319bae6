"""`agent-reach serve --workers N`: N coordinator processes on one port (SO_REUSEPORT)
sharing the Redis backend; refused on the memory backend."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread
from agent_reach.testing.waiting import wait_until

AGENT_REACH = str(Path(sys.executable).with_name("agent-reach"))
STARTUP_S = 60.0  # two interpreters importing the coordinator on a busy 2-core machine


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_workers_on_the_memory_backend_are_refused_with_a_reason() -> None:
    env = {**os.environ, "AR_REGISTRY_BACKEND": "memory"}
    done = subprocess.run(
        [AGENT_REACH, "serve", "--workers", "2", "--port", str(free_port())],
        capture_output=True,
        text=True,
        env=env,
        timeout=STARTUP_S,
        check=False,
    )
    assert done.returncode == 1
    assert "workers_need_shared_state" in done.stderr
    assert "AR_REGISTRY_BACKEND=redis" in done.stderr


def test_two_workers_share_one_port_and_one_registry(redis_url: str, redis_prefix: str) -> None:
    port = free_port()
    env = {
        **os.environ,
        "AR_REGISTRY_BACKEND": "redis",
        "AR_REDIS_URL": redis_url,
        "AR_REDIS_PREFIX": redis_prefix,
        "AR_DECISION_LOG": "off",
    }
    parent = subprocess.Popen(
        [AGENT_REACH, "serve", "--workers", "2", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    nodes: set[str] = set()

    def both_answer() -> bool:
        # A new connection each time: the kernel spreads them across the workers.
        with contextlib.suppress(httpx.TransportError):
            nodes.add(httpx.get(f"{url}/healthz", timeout=5).json()["node"])
        return len(nodes) == 2

    try:
        wait_until(both_answer, "both workers to answer on the one port", timeout_s=STARTUP_S)
        agent = FakeAgent(answer={"ok": True})
        with ServerThread(agent) as server:
            registration = {
                "id": "w-1",
                "capabilities": ["echo"],
                "transport": {"endpoint": f"{server.url}/invoke"},
            }
            assert httpx.post(f"{url}/v1/agents", json=registration).status_code == 201
            for n in range(8):  # whichever worker takes the connection knows the agent
                body = {"capability": "echo", "request_id": f"r-{n}"}
                assert httpx.post(f"{url}/v1/invoke", json=body).json()["result"] == {"ok": True}
            assert len(agent.received) == 8
    finally:
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=STARTUP_S) == 0
