"""`/mcp`: the coordinator as an MCP server (streamable HTTP, the official `mcp` SDK).

One endpoint for every agent and federated MCP server: each caller sees one tool per
live capability it may invoke and may call exactly those (`faces/mcp_tools.py`, which
answers both without this module's sessions). Every protocol version the official
SDKs speak is served (`faces/mcp_versions.py`). Agents coming and going send
`notifications/tools/list_changed`: on handshake-era sessions as a notification, on
2026-07-28 connections to `subscriptions/listen` streams.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import mcp_types as types
import structlog
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agent_reach.errors import ReachError
from agent_reach.faces.mcp_auth import refusal, request_id_of, resource_audience
from agent_reach.faces.mcp_tools import call_tool, list_tools
from agent_reach.faces.mcp_versions import serve_aliases
from agent_reach.identity.certificates import peer_of
from agent_reach.model.access import AccessPolicy
from agent_reach.model.keys import Principal
from agent_reach.server.fastpath import read_body
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import Runtime

log = structlog.get_logger("agent_reach.faces")

MAX_SESSIONS = 10_000  # handshake-era sessions kept for notifications; the SDK's own cap is lower
WATCH_S = 0.25  # how often the live tool list is compared; a change reaches clients this fast
Scope = dict[str, Any]


class _ToolServer(Server[dict[str, Any]]):
    """The SDK's server, announcing `tools.listChanged` on handshake-era sessions too."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


class McpFace:
    """The MCP endpoint as an ASGI app; `running` holds its sessions and change watcher."""

    def __init__(self, runtime: Callable[[], Runtime | None]) -> None:
        self._runtime = runtime
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus)
        # Handshake-era sessions by Mcp-Session-Id: the latest request's ServerSession, whose
        # notifications without a related request go to the session's standalone stream.
        self.sessions: dict[str, ServerSession] = {}
        self.server = _ToolServer(
            "agent-reach",
            version="1",
            instructions="Each tool is a capability of a live agent; calling it invokes it.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self.listen,
        )
        self.manager: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def running(self, runtime: Runtime) -> AsyncIterator[None]:
        """Serve sessions and watch `runtime`'s tool list until the block ends."""
        self.manager = StreamableHTTPSessionManager(app=self.server)
        async with self.manager.run():
            watcher = asyncio.create_task(self._watch(runtime), name="mcp-tool-watch")
            try:
                yield
            finally:
                self.listen.close()
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
                self.manager = None

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        runtime, manager = self._runtime(), self.manager
        if runtime is None or manager is None:
            await json_response(
                {"error": {"code": "starting", "message": "the coordinator is starting"}}, 503
            )(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        try:
            await runtime.security.authenticate(
                _text(headers.get(b"authorization")),
                peer_of(scope),
                resource=resource_audience(runtime.settings, scope),
            )
        except ReachError as exc:
            body = b""
            if scope["method"] == "POST":
                with contextlib.suppress(ReachError):
                    body = await read_body(receive, runtime.settings.max_body_bytes, None)
            answer = refusal(runtime.settings, scope, exc, request_id_of(body))
            await answer(scope, receive, send)
            return
        try:
            scope, receive, send = await serve_aliases(
                scope, receive, send, runtime.settings.max_body_bytes
            )
        except ReachError as exc:  # a body too large, or the client gone before sending it
            await refusal(runtime.settings, scope, exc, None)(scope, receive, send)
            return
        await manager.handle_request(scope, receive, send)

    async def _principal(self, runtime: Runtime, ctx: ServerRequestContext[Any, Any]) -> Principal:
        request = ctx.request
        if request is None:
            return await runtime.security.authenticate(None)
        return await runtime.security.authenticate(
            request.headers.get("authorization"),
            peer_of(request.scope),
            resource=resource_audience(runtime.settings, request.scope),
        )

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        runtime = self._live_runtime()
        self._remember(ctx)
        principal = await self._principal(runtime, ctx)
        return types.ListToolsResult(tools=list_tools(runtime, principal))

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        runtime = self._live_runtime()
        self._remember(ctx)
        principal = await self._principal(runtime, ctx)
        return await call_tool(runtime, principal, params.name, params.arguments)

    def _remember(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """Keep a handshake-era session for list_changed notifications."""
        request = ctx.request
        session_id = request.headers.get("mcp-session-id") if request is not None else None
        if session_id is None or ctx.session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return  # 2026-07-28 clients listen with subscriptions/listen instead
        if len(self.sessions) >= MAX_SESSIONS and session_id not in self.sessions:
            self.sessions.pop(next(iter(self.sessions)))
        self.sessions[session_id] = ctx.session

    def _live_runtime(self) -> Runtime:
        runtime = self._runtime()
        if runtime is None:
            raise RuntimeError("the coordinator is not running")
        return runtime

    async def _watch(self, runtime: Runtime) -> None:
        """Tell clients when what they may be listed changes: the live capabilities, or
        the access rules of the policy in force."""
        seen = _offered(runtime)
        while True:
            await asyncio.sleep(WATCH_S)
            live = _offered(runtime)
            if live != seen:
                await self.bus.publish(ToolsListChanged())
                for session_id, session in list(self.sessions.items()):
                    try:
                        await session.send_tool_list_changed()
                    except Exception as exc:  # a closed session must not stop the others
                        log.info("mcp_session_dropped", error=type(exc).__name__)
                        self.sessions.pop(session_id, None)
            seen = live


def _offered(runtime: Runtime) -> tuple[frozenset[str], AccessPolicy]:
    """The live capabilities and the access rules: what every caller's list depends on."""
    live = frozenset(t for t, ids in runtime.registry.capabilities().items() if ids)
    return live, runtime.security.policy().access


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")
