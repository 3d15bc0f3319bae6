"""A stdio MCP server behind the sidecar, offered to the coordinator over streamable HTTP.

    agent-reach sidecar --config sidecar.yaml      # with `mcp_stdio: {command, args}`

The sidecar starts the server with the official SDK's stdio client, serves it at
`<its address>/mcp` (streamable HTTP: sessions of its own, JSON answers, a GET stream
per session for `notifications/tools/list_changed`) and registers
`transport: {"type": "mcp"}` with the coordinator, keeping the lease. The
coordinator then treats it as any MCP server: its tools are capabilities, it pings
it, follows its tool list and never sends a call twice. A server that exits is
started again; its sessions' streams then say its tool list changed, so the
coordinator reads it again. A call cut short by the exit answers a JSON-RPC error
(the tool may have run): the coordinator takes it as final.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import secrets
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import structlog
import uvicorn
import yaml
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import BaseModel, ConfigDict, Field
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from agent_reach.errors import CallerError, InvalidRequest, NotFound, ReachError
from agent_reach.federation.wire import SESSION_HEADER
from agent_reach.model.agents import AgentSpec
from agent_reach.sdk.client import ReachClient
from agent_reach.sidecar.mcp_stdio import StdioServer, StdioServerConfig
from agent_reach.sidecar.service import AgentConfig

log = structlog.get_logger("agent_reach.sidecar")

REGISTER_BACKOFF_MAX_S = 5.0
HEARTBEATS_PER_TTL = 3  # as the SDK agent: renew at ttl/3
BACKLOG = 2048  # uvicorn's default listen backlog
STARTUP_TIMEOUT_S = 30.0  # `npx -y <server>` may download the server first
_rng = random.Random()


class McpSidecarConfig(BaseModel):
    """`sidecar.yaml` for a stdio MCP server: the coordinator, this agent, the server."""

    model_config = ConfigDict(extra="forbid")

    coordinator: str
    api_key_env: str = "AR_API_KEY"  # the key is read from this variable, never from the file
    host: str = "127.0.0.1"
    port: int = Field(0, ge=0, le=65535)
    endpoint_url: str | None = None  # the /mcp URL to register, when the bound one is not it
    agent: AgentConfig
    mcp_stdio: StdioServerConfig
    tools: dict[str, str | None] = {}  # transport.tools: rename tools, or leave them out

    @classmethod
    def load(cls, path: Path) -> McpSidecarConfig | None:
        """The config when the file names `mcp_stdio`, else None (a service sidecar)."""
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise InvalidRequest(f"cannot read the sidecar config {path}: {exc}") from None
        if not isinstance(document, dict) or "mcp_stdio" not in document:
            return None
        return cls.model_validate(document)

    def spec(self, endpoint: str) -> AgentSpec:
        """The registration: an MCP agent at `endpoint` (the coordinator reads its tools)."""
        agent = self.agent
        transport: dict[str, Any] = {"type": "mcp", "endpoint": endpoint}
        if self.tools:
            transport["tools"] = self.tools
        return AgentSpec.model_validate(
            {
                "id": agent.id,
                "display_name": agent.display_name,
                "description": agent.description,
                "transport": transport,
                "ttl": agent.ttl,
                "timeout_class": agent.timeout_class,
                "domain": agent.domain,
                "context_fields": agent.context_fields,
            }
        )


class Bridge:
    """`/mcp` for the coordinator: sessions of its own in front of the one stdio session."""

    def __init__(self, server: StdioServer) -> None:
        self.server = server
        self.sessions: dict[str, asyncio.Queue[dict[str, Any]]] = {}

    async def handle(self, request: Request) -> Response:
        session_id = request.headers.get(SESSION_HEADER)
        if request.method == "DELETE":
            queue = self.sessions.pop(session_id or "", None)
            if queue is not None:
                self.server.listeners.discard(queue)
            return Response(status_code=200 if queue is not None else 404)
        if request.method == "GET":
            return self._stream(session_id)
        try:
            message = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            return _error_response(None, -32700, "the body is not JSON", 400)
        if not isinstance(message, dict):
            return _error_response(None, -32600, "send one JSON-RPC message", 400)
        if message.get("method") == "initialize":
            return self._initialize(message)
        if session_id is None:
            return _error_response(message.get("id"), -32600, "no Mcp-Session-Id", 400)
        if session_id not in self.sessions:
            return _error_response(message.get("id"), -32001, "session not found", 404)
        if "id" not in message or "method" not in message:
            return Response(status_code=202)  # a notification or a response: taken
        return await self._request(message)

    def _initialize(self, message: dict[str, Any]) -> Response:
        asked = (message.get("params") or {}).get("protocolVersion")
        version = asked if asked in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
        session_id = secrets.token_hex(16)
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.sessions[session_id] = queue
        self.server.listeners.add(queue)
        result = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": self.server.info or {"name": "stdio", "version": "0"},
        }
        body = {"jsonrpc": "2.0", "id": message.get("id"), "result": result}
        return _json(body, headers={SESSION_HEADER: session_id})

    async def _request(self, message: dict[str, Any]) -> Response:
        message_id, method = message["id"], str(message["method"])
        params = message.get("params") or {}
        try:
            result = await self.server.answer(method, params)
        except LookupError:
            return _error_response(message_id, -32601, f"{method} is not served here", 200)
        except RuntimeError as exc:
            return _error_response(message_id, -32603, str(exc), 503)
        except Exception as exc:
            # Sent to the server, no result back: it may have acted. An answer, so final.
            said = getattr(getattr(exc, "error", None), "message", None) or str(exc)
            return _error_response(message_id, -32603, f"the MCP server failed: {said}", 200)
        return _json({"jsonrpc": "2.0", "id": message_id, "result": result})

    def _stream(self, session_id: str | None) -> Response:
        queue = self.sessions.get(session_id or "")
        if queue is None:
            return _error_response(None, -32001, "session not found", 404)

        async def events() -> AsyncIterator[bytes]:
            while True:
                message = await queue.get()
                yield b"event: message\ndata: " + orjson.dumps(message) + b"\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")


class LeaseKeeper:
    """Registers the bridge as an MCP agent, heartbeats, registers again when forgotten."""

    def __init__(self, client: ReachClient, spec: AgentSpec) -> None:
        self.client = client
        self.spec = spec
        self.registered = False

    async def run(self) -> None:
        try:
            await self._register()
            while True:
                await asyncio.sleep(self.spec.ttl / HEARTBEATS_PER_TTL)
                try:
                    await self.client.heartbeat(self.spec.id)
                except NotFound:
                    await self._register()
                except ReachError as exc:
                    log.warning("agent_heartbeat_failed", agent_id=self.spec.id, code=exc.code)
        except CallerError as exc:
            log.error("agent_registration_refused", agent_id=self.spec.id, error=exc.message)

    async def _register(self) -> None:
        delay_s = 0.1
        while True:
            try:
                await self.client.register(self.spec)
            except CallerError:
                raise
            except ReachError as exc:
                log.warning("agent_registration_failed", agent_id=self.spec.id, code=exc.code)
                await asyncio.sleep(delay_s * _rng.uniform(0.5, 1.0))
                delay_s = min(delay_s * 2, REGISTER_BACKOFF_MAX_S)
                continue
            self.registered = True
            log.info("agent_registered", agent_id=self.spec.id, transport="mcp")
            return

    async def leave(self) -> None:
        if self.registered:
            with contextlib.suppress(ReachError):
                await self.client.deregister(self.spec.id)


def bridge_app(
    server: StdioServer, spec_of: Callable[[], AgentSpec], coordinator: str, api_key: str | None
) -> Starlette:
    """The sidecar's app: `/mcp`, and a lifespan that runs the server and the lease."""
    bridge = Bridge(server)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        runner = asyncio.create_task(server.run(), name="mcp-stdio-server")
        try:
            async with asyncio.timeout(STARTUP_TIMEOUT_S):
                await server.ready.wait()
        except TimeoutError:
            runner.cancel()
            raise RuntimeError(f"the stdio MCP server did not start: {server.last_error}") from None
        async with ReachClient(coordinator, api_key=api_key) as client:
            keeper = LeaseKeeper(client, spec_of())
            leasing = asyncio.create_task(keeper.run(), name="mcp-sidecar-lease")
            try:
                yield
            finally:
                for task in (leasing, runner):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                await keeper.leave()

    return Starlette(
        routes=[Route("/mcp", bridge.handle, methods=["GET", "POST", "DELETE"])],
        lifespan=lifespan,
    )


def serve_bridge(config: McpSidecarConfig) -> None:
    """Serve until interrupted (blocking): the server runs, is registered, leaves on stop."""
    sock = socket.socket(socket.AF_INET6 if ":" in config.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((config.host, config.port))
    sock.listen(BACKLOG)
    host = f"[{config.host}]" if ":" in config.host else config.host
    endpoint = config.endpoint_url or f"http://{host}:{sock.getsockname()[1]}/mcp"
    app = bridge_app(
        StdioServer(config.mcp_stdio),
        lambda: config.spec(endpoint),
        config.coordinator,
        os.environ.get(config.api_key_env),
    )
    uvicorn_config = uvicorn.Config(app, lifespan="on", access_log=False, log_level="info")
    uvicorn.Server(uvicorn_config).run(sockets=[sock])


def _json(
    body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(orjson.dumps(body), status, headers, media_type="application/json")


def _error_response(message_id: Any, code: int, message: str, status: int) -> Response:
    body = {"jsonrpc": "2.0", "id": message_id, "error": {"code": code, "message": message}}
    return _json(body, status)
