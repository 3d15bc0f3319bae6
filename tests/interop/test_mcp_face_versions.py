"""`/mcp` protocol currency: every version the official SDKs speak, negotiated.

The versions served cover the installed Python SDK's and the npm TypeScript SDK's;
`initialize` echoes a served version and answers any other with the latest handshake
version; the Python SDK lands on 2026-07-28 (discovery) or 2025-11-25 (handshake);
several tool calls run at once on one session; a foreign Origin or Host is refused.
Memory and Redis.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from interop_kit import PEERS, need
from mcp import Client
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    SUPPORTED_PROTOCOL_VERSIONS,
)

from agent_reach.config import Settings
from agent_reach.faces.mcp_versions import ALIASES, SERVED_VERSIONS
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, run_coordinator

ACCEPT = "application/json, text/event-stream"
TYPESCRIPT_VERSIONS = (
    "import('@modelcontextprotocol/sdk/types.js')"
    ".then(t => console.log(JSON.stringify(t.SUPPORTED_PROTOCOL_VERSIONS)))"
)


@pytest.fixture
def coordinator(settings: Settings) -> Iterator[str]:
    """A coordinator of this test's own (memory or Redis): the interop suite's shared
    one holds every other test's capabilities, and these tests list the tools."""
    with run_coordinator(settings) as (url, _):
        yield url


@pytest.fixture
def served(http: httpx.Client, coordinator: str) -> Iterator[tuple[str, FakeAgent]]:
    """The coordinator (memory or Redis, keys off) with one live tool `echo.say`."""
    agent = FakeAgent(answer={"text": "hi"})
    with ServerThread(agent) as server:
        body = {
            "id": "echo-1",
            "capabilities": ["echo.say"],
            "transport": {"type": "http", "endpoint": f"{server.url}/invoke"},
        }
        assert http.post("/v1/agents", json=body).status_code == 201
        yield coordinator, agent


def _rpc(url: str, message: dict[str, Any], **headers: str) -> tuple[httpx.Response, Any]:
    """POST one JSON-RPC message to /mcp: the answer and its JSON-RPC message."""
    answer = httpx.post(
        f"{url}/mcp", json=message, headers={"accept": ACCEPT, **headers}, timeout=10
    )
    text = answer.text
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    return answer, json.loads(text) if text else None


def _initialize(url: str, version: str, **headers: str) -> tuple[str, str]:
    """Initialize asking for `version`: the version answered and the session id."""
    params = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    answer, message = _rpc(url, request, **headers)
    assert answer.status_code == 200, answer.text
    return message["result"]["protocolVersion"], answer.headers["mcp-session-id"]


def test_every_version_the_official_sdks_speak_is_served() -> None:
    finished = subprocess.run(
        [need("node"), "-e", TYPESCRIPT_VERSIONS],
        cwd=PEERS,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    typescript = set(json.loads(finished.stdout))
    assert "2025-11-25" in typescript
    assert typescript | set(SUPPORTED_PROTOCOL_VERSIONS) <= set(SERVED_VERSIONS)


@pytest.mark.parametrize("version", [*ALIASES, *HANDSHAKE_PROTOCOL_VERSIONS])
def test_initialize_echoes_a_served_version_and_the_session_works_in_it(
    served: tuple[str, FakeAgent], version: str
) -> None:
    url, _ = served
    answered, session = _initialize(url, version)
    assert answered == version
    headers = {"mcp-session-id": session, "mcp-protocol-version": version}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert _rpc(url, initialized, **headers)[0].status_code == 202
    _, listed = _rpc(url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, **headers)
    assert [t["name"] for t in listed["result"]["tools"]] == ["echo.say"]
    _, pong = _rpc(url, {"jsonrpc": "2.0", "id": 3, "method": "ping"}, **headers)
    assert pong == {"jsonrpc": "2.0", "id": 3, "result": {}}


@pytest.mark.parametrize("version", ["1999-01-01", "2026-07-28"])
def test_initialize_answers_a_version_it_cannot_handshake_with_the_latest(
    served: tuple[str, FakeAgent], version: str
) -> None:
    # 2026-07-28 is served, but by the per-request envelope, never through initialize
    assert _initialize(served[0], version)[0] == LATEST_HANDSHAKE_VERSION


@pytest.mark.parametrize(("mode", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_the_python_sdk_negotiates_each_era_and_calls_at_once(
    served: tuple[str, FakeAgent], mode: str, version: str
) -> None:
    url, agent = served
    async with Client(f"{url}/mcp", mode=mode) as client:
        assert client.protocol_version == version  # (ping: the raw test; 2026-07-28 drops it)
        calls = [client.call_tool("echo.say", {"payload": {"n": n}}) for n in range(8)]
        results = await asyncio.gather(*calls)
    assert [r.structured_content for r in results] == [{"text": "hi"}] * 8
    assert sorted(r.body["payload"]["n"] for r in agent.received) == list(range(8))


def test_a_foreign_origin_or_host_is_refused_on_mcp(served: tuple[str, FakeAgent]) -> None:
    url, _ = served
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    port = url.rsplit(":", 1)[1]
    for headers in ({"origin": "http://evil.example"}, {"host": f"evil.example:{port}"}):
        answer = httpx.post(f"{url}/mcp", json=ping, headers={"accept": ACCEPT, **headers})
        assert answer.status_code == 403, headers
        assert answer.json()["error"]["code"] == "origin_not_allowed"
    # the coordinator's own origin, and loopback names, come in
    for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        own = {"origin": f"http://{host}", "host": host}
        assert _initialize(url, "2025-11-25", **own)[0] == "2025-11-25"
