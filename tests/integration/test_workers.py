"""`agent-reach serve --workers N`: N coordinator processes on one port (SO_REUSEPORT)
sharing the Redis backend; refused on the memory backend."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import httpx

from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.ports import on_free_ports
from agent_reach.testing.serve_process import ServeProcess
from agent_reach.testing.servers import ServerThread
from agent_reach.testing.waiting import wait_until

AGENT_REACH = str(Path(sys.executable).with_name("agent-reach"))
STARTUP_S = 60.0  # two interpreters importing the coordinator on a busy 2-core machine


def test_workers_on_the_memory_backend_are_refused_with_a_reason() -> None:
    env = {**os.environ, "AR_REGISTRY_BACKEND": "memory"}
    done = subprocess.run(
        [AGENT_REACH, "serve", "--workers", "2", "--port", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=STARTUP_S,
        check=False,
    )
    assert done.returncode == 2  # a bad setting: one line, exit status 2
    assert "workers_need_shared_state" in done.stderr
    assert "AR_REGISTRY_BACKEND=redis" in done.stderr


def test_two_workers_share_one_port_and_one_registry(redis_url: str, redis_prefix: str) -> None:
    env = {
        **os.environ,
        "AR_REGISTRY_BACKEND": "redis",
        "AR_REDIS_URL": redis_url,
        "AR_REDIS_PREFIX": redis_prefix,
        "AR_DECISION_LOG": "off",
    }
    # Each worker binds the port itself: port 0 would give each its own, so the port is
    # picked here and picked again if another process takes it first.
    server = on_free_ports(
        lambda port: ServeProcess(
            "--workers", "2", port=port, env=env, command=[AGENT_REACH]
        ).start(STARTUP_S)
    )
    url = server.url
    nodes: set[str] = set()

    def both_answer() -> bool:
        # A new connection each time: the kernel spreads them across the workers.
        with contextlib.suppress(httpx.TransportError):
            nodes.add(httpx.get(f"{url}/healthz", timeout=5).json()["node"])
        return len(nodes) == 2

    try:
        wait_until(both_answer, "both workers to answer on the one port", timeout_s=STARTUP_S)
        agent = FakeAgent(answer={"ok": True})
        with ServerThread(agent) as server_thread:
            registration = {
                "id": "w-1",
                "capabilities": ["echo"],
                "transport": {"endpoint": f"{server_thread.url}/invoke"},
            }
            assert httpx.post(f"{url}/v1/agents", json=registration).status_code == 201
            for n in range(8):  # whichever worker takes the connection knows the agent
                body = {"capability": "echo", "request_id": f"r-{n}"}
                assert httpx.post(f"{url}/v1/invoke", json=body).json()["result"] == {"ok": True}
            assert len(agent.received) == 8
    finally:
        assert server.stop(timeout_s=STARTUP_S) == 0, server.stderr
