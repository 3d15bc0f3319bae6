"""The coordinator's ASGI app: the invoke fast path in front of the FastAPI control plane."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI

from agent_reach.clock import SYSTEM_CLOCK, Clock
from agent_reach.config import Settings
from agent_reach.errors import ReachError
from agent_reach.faces import a2a_routes, mcp_auth
from agent_reach.faces.a2a_notifier import notifying
from agent_reach.identity.origins import OriginGuard
from agent_reach.identity.tls import serving_context
from agent_reach.policy.source import PolicySource
from agent_reach.server.errors import install_error_handlers
from agent_reach.server.face_handler import CoordinatorFaces
from agent_reach.server.fastpath import handle_invoke
from agent_reach.server.limits import BodyLimit
from agent_reach.server.media import JsonBodies
from agent_reach.server.openapi import add_invoke_operation
from agent_reach.server.responses import error_response
from agent_reach.server.routes import (
    agents,
    contexts,
    decisions,
    events,
    health,
    keys,
    learning,
    mesh,
    policy,
    queues,
    requests,
    routing,
    tasks,
    traces,
    traffic,
    workflows,
)
from agent_reach.server.routes.dashboard import mount_dashboard
from agent_reach.server.runtime import Runtime, open_runtime

NODE_HEADER = b"x-reach-node"


class CoordinatorApp:
    """ASGI entry: `POST /v1/invoke` goes straight to the invoker, the rest to FastAPI."""

    def __init__(self, settings: Settings, clock: Clock = SYSTEM_CLOCK) -> None:
        self.settings = settings
        self.runtime: Runtime | None = None
        self.faces: CoordinatorFaces | None = None  # what the A2A and MCP faces ask of it
        self.startup_error: ReachError | ValueError | None = None
        source = PolicySource(  # a bad file fails here, not later
            clock, settings.policy_file, settings.route_affinity_default
        )
        self.ssl_context = serving_context(settings)  # HTTPS (AR_TLS_*); likewise
        # Imported here, not at the top: the `mcp` SDK takes ~1 s to import, and every
        # agent process imports this module through `agent_reach` without serving MCP.
        from agent_reach.faces.mcp_server import McpFace

        self.mcp = McpFace(lambda: self.faces)

        @asynccontextmanager
        async def lifespan(api: FastAPI) -> AsyncIterator[None]:
            async with AsyncExitStack() as stack:
                try:
                    runtime = await stack.enter_async_context(open_runtime(settings, clock, source))
                except (ReachError, ValueError) as exc:  # a setting or the store: one line
                    self.startup_error = exc
                    raise
                api.state.runtime = self.runtime = runtime
                api.state.faces = self.faces = faces = CoordinatorFaces(runtime)
                async with self.mcp.running(faces), notifying(faces):
                    yield
                self.runtime = self.faces = None

        self.api = FastAPI(
            title="Agent-Reach coordinator",
            version="1",
            lifespan=lifespan,
            docs_url="/docs",
            redoc_url=None,
        )
        install_error_handlers(self.api)
        routers = (agents, routing, tasks, health, traces, decisions, queues, contexts, keys)
        for module in (*routers, policy):
            self.api.include_router(module.router)
        self.api.include_router(a2a_routes.router)
        self.api.include_router(mesh.router)  # delegation keys, the kill switch
        self.api.include_router(mcp_auth.router)  # /mcp's OAuth protected resource metadata
        self.api.include_router(requests.router)  # `agent-reach why`
        self.api.include_router(workflows.router)
        self.api.include_router(learning.router)
        self.api.include_router(events.router)
        self.api.include_router(traffic.router)  # the dashboard's charts
        mount_dashboard(self.api)
        add_invoke_operation(self.api)
        self._control_plane = BodyLimit(JsonBodies(self.api), settings.max_body_bytes)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        runtime = self.runtime
        if runtime is not None and scope["type"] == "http":
            send = _naming_node(send, runtime.node_id.encode())
            if scope["path"] == "/v1/invoke" and scope["method"] == "POST":
                await handle_invoke(
                    scope, receive, send, runtime.invoke, self.settings.max_body_bytes
                )
                return
            try:
                _check_origin(runtime.security.origins, scope)
            except ReachError as exc:
                await error_response(exc)(scope, receive, send)
                return
        if scope["type"] == "http" and scope["path"] == "/mcp":
            await self.mcp(scope, receive, send)
        else:
            await self._control_plane(scope, receive, send)


def _check_origin(origins: OriginGuard, scope: dict[str, Any]) -> None:
    """403 `origin_not_allowed` for a foreign browser origin or, on loopback, Host."""
    host = origin = None
    for name, value in scope["headers"]:
        if name == b"host":
            host = value
        elif name == b"origin":
            origin = value
    origins.check(scope["path"], host, origin)


def _naming_node(send: Any, node: bytes) -> Any:
    """`send` adding ``X-Reach-Node``: behind a balancer, which coordinator answered."""

    async def send_named(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", ()), (NODE_HEADER, node)]
        await send(message)

    return send_named


def create_app(settings: Settings | None = None, clock: Clock = SYSTEM_CLOCK) -> CoordinatorApp:
    """The coordinator as an ASGI app; its lifespan opens and closes everything it holds."""
    return CoordinatorApp(settings or Settings(), clock)
