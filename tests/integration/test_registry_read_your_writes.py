"""An agent registered through one coordinator is served at once by any other on the
same store (standalone Redis and Cluster), even before the registration's event has
reached it: a coordinator re-reads the registry before it refuses a named capability
it has no instance of.

Coordinator B's event follower (and its periodic resync) are stopped, so the event can
never arrive: only the re-read can find the agent, and the test cannot pass by timing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from agent_reach.config import Settings
from agent_reach.server.app import CoordinatorApp, create_app
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread

FOLLOWERS = ("registry-watch", "registry-resync")


def _stop_following(server: ServerThread) -> None:
    """Cancel the coordinator's registry event follower and periodic resync."""
    assert server.loop is not None

    async def cancel() -> list[str]:
        tasks = [t for t in asyncio.all_tasks() if t.get_name() in FOLLOWERS]
        # until they have ended: a cancellation arriving inside a driver call can be
        # absorbed by its retry logic, and a follower still running would learn the event
        while not all(t.done() for t in tasks):
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks, timeout=0.1)
        return sorted(t.get_name() for t in tasks)

    stopped = asyncio.run_coroutine_threadsafe(cancel(), server.loop).result(timeout=10)
    assert stopped == sorted(FOLLOWERS)


@pytest.fixture
def two(shared: Settings) -> Iterator[tuple[httpx.Client, httpx.Client, CoordinatorApp]]:
    """A, and B that follows no registry events."""
    with ExitStack() as stack:
        b_app = create_app(shared.model_copy(update={"node_id": "coord-b"}))
        b_server = stack.enter_context(ServerThread(b_app))
        _stop_following(b_server)
        a_server = stack.enter_context(
            ServerThread(create_app(shared.model_copy(update={"node_id": "coord-a"})))
        )
        a = stack.enter_context(httpx.Client(base_url=a_server.url, timeout=10))
        b = stack.enter_context(httpx.Client(base_url=b_server.url, timeout=10))
        assert isinstance(b_app, CoordinatorApp)
        yield a, b, b_app


def _registration(url: str) -> dict[str, Any]:
    return {"id": "ryw-1", "capabilities": ["ryw.echo"], "transport": {"endpoint": url}}


def test_an_agent_registered_at_one_coordinator_is_invoked_at_once_through_another(
    two: tuple[httpx.Client, httpx.Client, CoordinatorApp],
) -> None:
    a, b, b_app = two
    agent = FakeAgent(answer={"ok": True})
    with ServerThread(agent) as server:
        assert b_app.runtime is not None
        assert "ryw-1" not in b_app.runtime.registry.index.by_id
        assert a.post("/v1/agents", json=_registration(f"{server.url}/invoke")).status_code == 201
        routed = b.post("/v1/route", json={"capability": "ryw.echo"})
        assert routed.status_code == 200, routed.text
        assert routed.json()["agent_id"] == "ryw-1"
        answer = b.post("/v1/invoke", json={"capability": "ryw.echo", "request_id": "ryw-r1"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"] == {"ok": True}
        assert [r.body["request_id"] for r in agent.received] == ["ryw-r1"]  # executed once


def test_a_capability_nobody_registered_is_still_refused_after_the_re_read(
    two: tuple[httpx.Client, httpx.Client, CoordinatorApp],
) -> None:
    _, b, _ = two
    answer = b.post("/v1/invoke", json={"capability": "ryw.nobody", "request_id": "ryw-r2"})
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "no_capability"
    routed = b.post("/v1/route", json={"capability": "ryw.nobody"})
    assert routed.status_code == 404
    assert routed.json()["error"]["code"] == "no_capability"


def test_an_agent_registered_at_one_coordinator_is_listed_at_once_by_another(
    two: tuple[httpx.Client, httpx.Client, CoordinatorApp],
) -> None:
    a, b, _ = two
    assert b.get("/v1/agents/ryw-2").status_code == 404
    registration = _registration("http://127.0.0.1:9/invoke") | {"id": "ryw-2"}
    assert a.post("/v1/agents", json=registration).status_code == 201
    found = b.get("/v1/agents/ryw-2")
    assert found.status_code == 200, found.text
    assert found.json()["id"] == "ryw-2"


def test_requests_naming_capabilities_nobody_registered_do_not_re_read_the_registry(
    two: tuple[httpx.Client, httpx.Client, CoordinatorApp],
) -> None:
    a, b, b_app = two
    assert b_app.runtime is not None
    store = b_app.runtime.registry.store
    loads: list[int] = []
    load = store.load

    async def counted() -> Any:
        loads.append(1)
        return await load()

    store.load = counted  # type: ignore[method-assign]
    for n in range(40):  # a caller guessing names: each one unknown everywhere
        answer = b.post("/v1/invoke", json={"capability": f"ryw.guess-{n}"})
        assert answer.status_code == 404, answer.text
    assert loads == []  # one version read each, never the whole registry

    registration = _registration("http://127.0.0.1:9/invoke") | {"id": "ryw-3"}
    assert a.post("/v1/agents", json=registration).status_code == 201
    routed = b.post("/v1/route", json={"capability": "ryw.echo"})
    assert routed.status_code == 200, routed.text
    assert routed.json()["agent_id"] == "ryw-3"
    assert len(loads) == 1  # the registration was news: read once
