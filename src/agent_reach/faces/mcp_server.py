"""`/mcp`: the coordinator as an MCP server (streamable HTTP, the official `mcp` SDK).

One endpoint for every agent and federated MCP server: each caller sees one tool per
live capability it may invoke and may call exactly those (`faces/mcp_tools.py`, which
answers both without this module's sessions). Every protocol version the official
SDKs speak is served (`faces/mcp_versions.py`). Agents coming and going send
`notifications/tools/list_changed`: on handshake-era sessions as a notification, on
2026-07-28 connections to `subscriptions/listen` streams. The face keeps the
handshake-era sessions it opened (`faces/mcp_sessions.py`): the edge server answers a
`tools/call` inside one on its fast path, and the face expires idle ones.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, MutableMapping
from typing import Any

import mcp_types as types
import structlog
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.models import InitializationOptions
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged

from agent_reach.errors import ReachError
from agent_reach.faces.handler import FaceHandler
from agent_reach.faces.mcp_auth import refusal, request_id_of, resource_audience
from agent_reach.faces.mcp_sessions import LiveSessions, Opening, session_not_found
from agent_reach.faces.mcp_tools import call_tool, list_tools
from agent_reach.faces.mcp_versions import serve_aliases
from agent_reach.identity.certificates import peer_of
from agent_reach.model.keys import Principal
from agent_reach.wire.asgi_body import read_body
from agent_reach.wire.json_answers import json_response

log = structlog.get_logger("agent_reach.faces")

WATCH_S = 0.25  # how often the live tool list is compared; a change reaches clients this fast
# The request's principal, as the face authenticated it, and an `initialize`'s `Opening`,
# carried in the ASGI scope to the handlers and the middleware.
PRINCIPAL, OPENING = "agent_reach.mcp.principal", "agent_reach.mcp.opening"
_SESSION = MCP_SESSION_ID_HEADER.encode()
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

    def __init__(self, handler: Callable[[], FaceHandler | None]) -> None:
        self._handler = handler
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus)
        self.sessions = LiveSessions()
        self.server = _ToolServer(
            "agent-reach",
            version="1",
            instructions=(
                "Each tool is a capability of a live agent; calling it invokes it. With many "
                "tools, call find_tools with the user's request to get the few that fit."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self.listen,
        )
        self.server.middleware.append(self._opened)
        self.manager: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def running(self, handler: FaceHandler) -> AsyncIterator[None]:
        """Serve sessions and watch `handler`'s tool list until the block ends."""
        # Idle sessions are the face's to end (`_expire`): fast-path calls keep them in use.
        self.manager = StreamableHTTPSessionManager(app=self.server, session_idle_timeout=None)
        async with self.manager.run():
            loops = [
                asyncio.create_task(self._watch(handler), name="mcp-tool-watch"),
                asyncio.create_task(self._expire(self.manager), name="mcp-session-expiry"),
            ]
            try:
                yield
            finally:
                self.listen.close()
                for loop in loops:
                    loop.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await loop
                self.manager = None
                self.sessions.clear()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        handler, manager = self._handler(), self.manager
        if handler is None or manager is None:
            await json_response(
                {"error": {"code": "starting", "message": "the coordinator is starting"}}, 503
            )(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        try:
            principal = await handler.authenticate(
                _text(headers.get(b"authorization")),
                peer_of(scope),
                resource=resource_audience(handler.settings, scope),
            )
        except ReachError as exc:
            body = b""
            if scope["method"] == "POST":
                with contextlib.suppress(ReachError):
                    body = await read_body(receive, handler.settings.max_body_bytes, None)
            answer = refusal(handler.settings, scope, exc, request_id_of(body))
            await answer(scope, receive, send)
            return
        try:
            scope, receive, send = await serve_aliases(
                scope, receive, send, handler.settings.max_body_bytes
            )
        except ReachError as exc:  # a body too large, or the client gone before sending it
            await refusal(handler.settings, scope, exc, None)(scope, receive, send)
            return
        session_id = _text(headers.get(_SESSION))
        scope = {**scope, PRINCIPAL: principal}
        if session_id is None:
            if scope["method"] == "POST":  # perhaps an `initialize`: a session opens
                opening = Opening(principal)
                scope[OPENING] = opening
                status, opened = await _answered(manager, scope, receive, send)
                if status == 200 and opened is not None:
                    self.sessions.opened(opened, opening)
            else:
                await manager.handle_request(scope, receive, send)
            return
        if self.sessions.foreign(session_id, principal):
            log.warning("mcp_session_refused", principal=principal.name)
            await session_not_found()(scope, receive, send)
            return
        with self.sessions.using(session_id):
            status, _ = await _answered(manager, scope, receive, send)
        if status == 404 or (status == 200 and scope["method"] == "DELETE"):
            self.sessions.ended(session_id)

    async def _opened(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Middleware: an `initialize` that succeeded tells its `Opening` the negotiated
        version and the session's server side."""
        result = await call_next(ctx)
        request = ctx.request
        opening = request.scope.get(OPENING) if request is not None else None
        if ctx.method == "initialize" and isinstance(opening, Opening):
            version = result.get("protocolVersion") if isinstance(result, dict) else None
            if isinstance(version, str):
                opening.version, opening.server_side = version, ctx.session
        return result

    async def _principal(
        self, handler: FaceHandler, ctx: ServerRequestContext[Any, Any]
    ) -> Principal:
        """The request's principal: as `__call__` authenticated it, else authenticated."""
        request = ctx.request
        if request is None:
            return await handler.authenticate(None)
        principal = request.scope.get(PRINCIPAL)
        if isinstance(principal, Principal):
            return principal
        return await handler.authenticate(
            request.headers.get("authorization"),
            peer_of(request.scope),
            resource=resource_audience(handler.settings, request.scope),
        )

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        handler = self._live_handler()
        principal = await self._principal(handler, ctx)
        return types.ListToolsResult(tools=list_tools(handler, principal))

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        handler = self._live_handler()
        principal = await self._principal(handler, ctx)
        return await call_tool(handler, principal, params.name, params.arguments)

    def _live_handler(self) -> FaceHandler:
        handler = self._handler()
        if handler is None:
            raise RuntimeError("the coordinator is not running")
        return handler

    async def _watch(self, handler: FaceHandler) -> None:
        """Tell clients when what they may be listed changes: the live capabilities, or
        the access rules of the policy in force."""
        seen = handler.catalog.offered()
        while True:
            await asyncio.sleep(WATCH_S)
            live = handler.catalog.offered()
            if live != seen:
                await self.bus.publish(ToolsListChanged())
                for session_id, session in list(self.sessions.live.items()):
                    try:
                        await session.server_side.send_tool_list_changed()
                    except Exception as exc:  # a closed session must not stop the others
                        log.info("mcp_session_dropped", error=type(exc).__name__)
                        self.sessions.ended(session_id)
            seen = live

    async def _expire(self, manager: StreamableHTTPSessionManager) -> None:
        """End the sessions idle for `sessions.idle_s`, as the SDK's idle timer would:
        a `DELETE` through its own entry."""
        while True:
            await asyncio.sleep(min(self.sessions.idle_s / 4, 60.0))
            for session_id in self.sessions.idle():
                self.sessions.ended(session_id)
                try:
                    await _answered(manager, _delete_scope(session_id), _no_body, _discard)
                except Exception as exc:  # one session's end must not stop the others'
                    log.warning("mcp_session_expiry_failed", error=type(exc).__name__)


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")


async def _answered(
    manager: StreamableHTTPSessionManager, scope: Scope, receive: Any, send: Any
) -> tuple[int | None, str | None]:
    """The SDK's answer to a request: its status and the session id it names."""
    status: int | None = None
    session_id: str | None = None

    async def watch(message: MutableMapping[str, Any]) -> None:
        nonlocal status, session_id
        if message["type"] == "http.response.start":
            status = message["status"]
            session_id = _text(dict(message.get("headers") or []).get(_SESSION))
        await send(message)

    await manager.handle_request(scope, receive, watch)
    return status, session_id


def _delete_scope(session_id: str) -> Scope:
    """A client's `DELETE` of a session, as the SDK's entry reads one."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "DELETE",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "headers": [(_SESSION, session_id.encode("latin-1"))],
        "client": None,
        "server": None,
    }


async def _no_body() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _discard(message: MutableMapping[str, Any]) -> None:
    """Nobody reads the answer to the face's own `DELETE`."""
