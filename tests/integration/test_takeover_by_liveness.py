"""A coordinator dies mid-delivery: its claim is taken over once its liveness runs out, and
the request is sent again only to an agent that declared `idempotent`.

Executions are counted at the agents. The guarded agent is an SDK `Agent` (it declares
`idempotent` and runs a request id once); the plain one is a FakeAgent registered
without it. For an invoke with the caller's request id, an asynchronous task and a
workflow step, the guarded agent is sent the request again and executes it once (the
caller gets its answer, the run is `ok`); the plain one is never sent it again and the
request ends 502 `outcome_unknown` (the task `error`, the step failed, the run `error`).

On memory the coordinator "restarts": a new coordinator (a new node id) on the same
port and the same in-process stores. On Redis a second coordinator joins the first once
the request has reached its agent (so the first holds it: two coordinators sharing a
queue would otherwise race to take an asynchronous task or run), then the first dies.
The first dies without a word either way: its event loop is stopped, nothing is released
and its liveness record is no longer renewed (what SIGKILL does to a process;
`tests/reliability/test_coordinator_takeover.py` SIGKILLs real processes).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvloop

from agent_reach.backends.bundle import Backends
from agent_reach.backends.memory import open_memory
from agent_reach.clock import Clock
from agent_reach.config import Settings
from agent_reach.sdk.agent import Agent, AgentRequest
from agent_reach.server.app import create_app
from agent_reach.server.edge import EdgeServer
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import STARTUP_TIMEOUT_S, ServerThread
from agent_reach.testing.waiting import wait_until

LIVENESS_TTL_S = 1.0
AGENT_DELAY_S = 2.0  # the delivery is still at the agent when its coordinator dies
POLICY = """
[timeout_classes.query]
timeout_s = 10.0
"""
_SHARED: dict[str, Backends] = {}  # the memory stores a restarted coordinator finds again


async def shared_memory(settings: Settings, clock: Clock) -> Backends:
    """The backend factory (`AR_REGISTRY_BACKEND=test_takeover_by_liveness:shared_memory`):
    one set of in-process stores for every coordinator of a test."""
    if "stores" not in _SHARED:
        _SHARED["stores"] = await open_memory(settings, clock)
        return _SHARED["stores"]
    stores = _SHARED["stores"]
    for queue in stores.queues._queues.values():  # type: ignore[attr-defined]
        queue.arrived = asyncio.Event()  # the old one woke the dead coordinator's loop
    return stores


class MortalServer(ServerThread):
    """A coordinator's server thread that can die as a killed process does."""

    def __init__(self, app: Any, port: int = 0) -> None:
        super().__init__(app, port=port)
        self.runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
        self.killed = False

    def _run(self) -> None:
        """Serve; a graceful stop ends the loop as `asyncio.Runner` does, a kill leaves its
        tasks where they stand until `bury`."""
        try:
            self.runner.run(self._serve())
        except RuntimeError:  # "Event loop stopped before Future completed": killed
            return
        self.runner.close()

    def kill(self) -> None:
        """Stop its event loop where it stands: no answer, no release, no more beats, and
        its port refuses connections and its clients' connections end (each socket is shut
        down under the loop, as the kernel does a killed process's)."""
        assert self.loop is not None
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(STARTUP_TIMEOUT_S)
        self.killed = True
        self.sock.shutdown(socket.SHUT_RDWR)  # the loop's copy of it shares the shutdown
        self.sock.close()
        assert isinstance(self.server, EdgeServer)
        for connection in self.server.connections:  # as the kernel closes a dead process's
            transport_socket = connection.transport.get_extra_info("socket")
            if transport_socket is None or transport_socket.fileno() < 0:
                continue  # closed already
            with socket.socket(fileno=os.dup(transport_socket.fileno())) as held:
                held.shutdown(socket.SHUT_RDWR)  # the loop's copy shares it

    def bury(self) -> None:
        """After the test: cancel the dead loop's tasks into their cleanup and close it, so
        nothing of it is finalised later, in another test; its connections close at once."""
        assert isinstance(self.server, EdgeServer)
        self.server.should_exit = self.server.force_exit = True
        self.runner.close()

    def end(self) -> None:
        """Stop it, whichever way it lives."""
        if self.killed:
            self.bury()
        else:
            self.stop()


class Guarded:
    """An SDK agent counting the executions of its handler by request id."""

    def __init__(self, coordinator: str) -> None:
        self.executed: Counter[str] = Counter()
        self.agent = Agent("guarded-1", ["work.guarded"], coordinator_url=coordinator, ttl=60)

        @self.agent.handler
        async def act(request: AgentRequest) -> dict[str, Any]:
            self.executed[request.request_id] += 1
            await asyncio.sleep(AGENT_DELAY_S)
            return {"done": request.request_id}

        self.server = ServerThread(self.agent.app)
        self.agent.endpoint_url = f"{self.server.url}/invoke"


class Cluster:
    """The coordinator that dies (`first`) and the one that answers afterwards."""

    def __init__(self, settings: Callable[[], Settings], shared: bool) -> None:
        self.settings, self.shared = settings, shared
        self.first = MortalServer(create_app(settings()))
        self.first.start()
        self.port = self.first.port
        self.survivor: MortalServer | None = None

    def kill_first(self) -> str:
        """Kill the first coordinator; the survivor's URL: on Redis a second coordinator
        started just before, on memory a restart on the same port."""
        if self.shared:
            self.survivor = MortalServer(create_app(self.settings()))
            self.survivor.start()
            self.first.kill()
        else:
            self.first.kill()
            self.survivor = MortalServer(create_app(self.settings()), port=self.port)
            self.survivor.start()
        return self.survivor.url

    def close(self) -> None:
        """The survivor stops first: on memory the dead loop's cleanup touches the stores
        the survivor used."""
        if self.survivor is not None:
            self.survivor.end()
        self.first.end()


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    common: dict[str, Any] = {
        "decision_log": "off",
        "policy_file": policy,
        "liveness_ttl_s": LIVENESS_TTL_S,
    }
    if request.param == "memory":
        _SHARED.clear()
        common["registry_backend"] = "test_takeover_by_liveness:shared_memory"
    else:
        common |= {
            "registry_backend": "redis",
            "redis_url": request.getfixturevalue("redis_url"),
            "redis_prefix": request.getfixturevalue("redis_prefix"),
            "cluster_mode": True,
        }
    built = Cluster(lambda: Settings(**common), shared=request.param == "redis")
    yield built
    built.close()
    _SHARED.clear()


@pytest.fixture
def agents(cluster: Cluster) -> Iterator[tuple[Guarded, FakeAgent]]:
    """The guarded SDK agent and a plain FakeAgent, both registered and healthy."""
    guarded = Guarded(cluster.first.url)
    plain = FakeAgent(name="plain", delay_s=AGENT_DELAY_S)
    with guarded.server, ServerThread(plain) as plain_server:
        with httpx.Client(base_url=cluster.first.url, timeout=10) as http:
            answer = http.post(
                "/v1/agents",
                json={
                    "id": "plain-1",
                    "capabilities": ["work.plain"],
                    "transport": {"endpoint": f"{plain_server.url}/invoke"},
                    "ttl": 60,
                },
            )
            assert answer.status_code == 201, answer.text
            for agent_id in ("guarded-1", "plain-1"):
                wait_until(
                    lambda a=agent_id: (
                        http.get(f"/v1/agents/{a}").json().get("status") == "healthy"
                    ),
                    f"{agent_id} healthy",
                )
            listed = {a["id"]: a["idempotent"] for a in http.get("/v1/agents").json()["agents"]}
            assert listed == {"guarded-1": True, "plain-1": False}
        yield guarded, plain


def _in_background(call: Callable[[], Any]) -> threading.Thread:
    """Send a request whose answer the test does not wait for (its coordinator dies)."""

    def run() -> None:
        with contextlib.suppress(httpx.HTTPError):
            call()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _plain_deliveries(plain: FakeAgent, request_id: str) -> int:
    return sum(r.body.get("request_id") == request_id for r in plain.received)


def _final(http: httpx.Client, path: str) -> dict[str, Any]:
    """The task or run at `path` once it has ended (polled on the survivor)."""
    ended: dict[str, Any] = {}

    def done() -> bool:
        document = http.get(path).json()
        ended.update(document)
        return document.get("status") not in ("queued", "running", "pending", "suspended")

    wait_until(done, f"{path} to end", timeout_s=30)
    return ended


@pytest.mark.parametrize("capability", ["work.guarded", "work.plain"])
def test_an_invoke_with_a_callers_request_id(cluster, agents, capability):
    guarded, plain = agents
    body = {"capability": capability, "request_id": f"inv-{capability}", "payload": {"n": 1}}
    first = cluster.first.url
    _in_background(lambda: httpx.post(f"{first}/v1/invoke", json=body, timeout=30))
    wait_until(
        lambda: guarded.executed[body["request_id"]] + _plain_deliveries(plain, body["request_id"]),
        "the delivery to reach its agent",
    )

    survivor = cluster.kill_first()
    again = httpx.post(f"{survivor}/v1/invoke", json=body, timeout=30)

    if capability == "work.guarded":
        assert again.status_code == 200, again.text
        assert again.json()["result"] == {"done": body["request_id"]}
        assert guarded.executed[body["request_id"]] == 1
    else:
        assert again.status_code == 502, again.text
        assert again.json()["error"]["code"] == "outcome_unknown"
        assert _plain_deliveries(plain, body["request_id"]) == 1


@pytest.mark.parametrize("capability", ["work.guarded", "work.plain"])
def test_an_asynchronous_task(cluster, agents, capability):
    guarded, plain = agents
    request_id = f"task-{capability}"
    body = {"capability": capability, "request_id": request_id, "mode": "async"}
    accepted = httpx.post(f"{cluster.first.url}/v1/invoke", json=body, timeout=10)
    assert accepted.status_code == 202, accepted.text
    wait_until(
        lambda: guarded.executed[request_id] + _plain_deliveries(plain, request_id),
        "the task's delivery to reach its agent",
    )

    survivor = cluster.kill_first()
    with httpx.Client(base_url=survivor, timeout=10) as http:
        task = _final(http, f"/v1/tasks/{request_id}")

    if capability == "work.guarded":
        assert task["status"] == "ok", task
        assert guarded.executed[request_id] == 1
    else:
        assert task["status"] == "error", task
        assert task["answer"]["error"]["code"] == "outcome_unknown"
        assert _plain_deliveries(plain, request_id) == 1


@pytest.mark.parametrize("capability", ["work.guarded", "work.plain"])
def test_a_workflow_step(cluster, agents, capability):
    guarded, plain = agents
    run_id = f"run-{capability.replace('.', '-')}"
    step_id = f"{run_id}:work"
    body = {
        "intent": "takeover",
        "request_id": run_id,
        "mode": "async",
        "steps": [{"id": "work", "action": capability, "param": {"n": 2}}],
    }
    accepted = httpx.post(f"{cluster.first.url}/v1/workflows/run", json=body, timeout=10)
    assert accepted.status_code == 202, accepted.text
    wait_until(
        lambda: guarded.executed[step_id] + _plain_deliveries(plain, step_id),
        "the step's delivery to reach its agent",
    )

    survivor = cluster.kill_first()
    with httpx.Client(base_url=survivor, timeout=10) as http:
        run = _final(http, f"/v1/workflows/{run_id}")

    [step] = run["steps"]
    assert run["takeovers"] == 1, run
    if capability == "work.guarded":
        assert (run["status"], step["status"]) == ("ok", "ok"), run
        assert guarded.executed[step_id] == 1
    else:
        assert (run["status"], step["status"]) == ("error", "failed"), run
        assert step["error"]["code"] == "outcome_unknown"
        assert _plain_deliveries(plain, step_id) == 1
