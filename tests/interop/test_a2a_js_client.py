"""The coordinator's A2A face driven by the official JavaScript SDK client (`@a2a-js/sdk`
from npm, `peers/a2a_client.mjs`) on both bindings, on memory and Redis."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import httpx
import pytest
from interop_kit import PEERS, need
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agent_reach.config import Settings
from agent_reach.testing.servers import ServerThread, run_coordinator


@pytest.fixture
def face(settings: Settings) -> Iterator[str]:
    """A coordinator of its own (memory, then Redis): the interop one is shared."""
    with run_coordinator(settings) as (url, _):
        yield url


@pytest.fixture
def echo_agent(face: str) -> Iterator[list[str]]:
    """An agent for `echo.say`; yields the texts it was given."""
    seen: list[str] = []

    async def invoke(request: Request) -> JSONResponse:
        text = (await request.json()).get("text")
        seen.append(text)
        return JSONResponse({"text": f"echo: {text}"})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    app = Starlette(routes=[Route("/invoke", invoke, methods=["POST"]), Route("/health", health)])
    with ServerThread(app) as server:
        registered = httpx.post(
            f"{face}/v1/agents",
            json={
                "id": "echo-1",
                "capabilities": ["echo.say"],
                "transport": {"type": "http", "endpoint": f"{server.url}/invoke"},
            },
        )
        assert registered.status_code == 201
        yield seen


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_the_javascript_sdk_client_sends_reads_lists_cancels_and_streams(
    face: str, echo_agent: list[str], binding: str
) -> None:
    if not (PEERS / "node_modules" / "@a2a-js" / "sdk").is_dir():
        pytest.fail("@a2a-js/sdk is not installed: run npm install in tests/interop/peers")
    run = subprocess.run(
        [need("node"), "a2a_client.mjs", face, binding],
        cwd=PEERS,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["reply"] == {"state": "TASK_STATE_COMPLETED", "texts": ["echo: hi"]}
    assert out["asked"] == ["echo: hi"]  # a Message, as the message's metadata asked
    assert out["declined"]["state"] == "TASK_STATE_REJECTED"
    assert "no registered agent offers the capability" in out["declined"]["why"][0]
    assert out["read"] == {"state": "TASK_STATE_REJECTED", "history": 1}
    assert out["listed"]["ids"] == out["listed"]["mine"]  # newest first
    assert out["listed"]["totalSize"] == 2
    assert out["cancel"]["error"].endswith("TaskNotCancelableError"), out["cancel"]
    assert out["unknown"]["error"].endswith("TaskNotFoundError"), out["unknown"]
    assert out["streamedText"] == ["echo: streamed"]
    assert echo_agent == ["hi", "hi", "streamed"]
