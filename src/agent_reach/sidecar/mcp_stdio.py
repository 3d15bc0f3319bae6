"""A stdio MCP server run by the sidecar through the official SDK's stdio client.

The server is started, initialized, pinged every second, and started again whenever it
exits or hangs. `answer` forwards one request to it; a `notifications/tools/list_changed`
from it (and every restart) is put on each listener's queue, for the bridge's streams.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import structlog
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from pydantic import BaseModel, ConfigDict, Field

log = structlog.get_logger("agent_reach.sidecar")

PING_EVERY_S = 1.0  # how soon an exited server is noticed and started again
PING_TIMEOUT_S = 5.0  # a server that cannot answer a ping in this time is hung
RESTART_PAUSE_S = 0.5  # between a server's exit and its next start
CALL_TIMEOUT_S = 600.0  # the coordinator's attempt timeout ends a call first
LIST_CHANGED = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


class StdioServerConfig(BaseModel):
    """`mcp_stdio` in sidecar.yaml: how to start the server."""

    model_config = ConfigDict(extra="forbid")

    command: str
    args: list[str] = []
    env: dict[str, str] = Field(default_factory=dict)  # over the sidecar's own environment
    cwd: str | None = None


class StdioServer:
    """The running server and its SDK session; started again whenever it exits."""

    def __init__(self, config: StdioServerConfig) -> None:
        self.params = StdioServerParameters(
            command=config.command, args=config.args, env=config.env or None, cwd=config.cwd
        )
        self.session: ClientSession | None = None
        self.info: dict[str, Any] = {}
        self.ready = asyncio.Event()
        self.listeners: set[asyncio.Queue[dict[str, Any]]] = set()
        self.starts = 0
        self.last_error = "it has not started yet"

    async def run(self) -> None:
        """Start, serve until it exits, start again; until cancelled."""
        while True:
            try:
                await self._serve_once()
            except Exception as exc:  # the process exited or never spoke MCP
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("mcp_stdio_server_stopped", error=self.last_error)
            self.session = None
            self.ready.clear()
            await asyncio.sleep(RESTART_PAUSE_S)

    async def _serve_once(self) -> None:
        async with (
            stdio_client(self.params) as (read, write),
            ClientSession(read, write, message_handler=self._heard) as session,
        ):
            result = await session.initialize()
            self.info = result.server_info.model_dump(mode="json", exclude_none=True)
            self.session = session
            self.ready.set()
            self.starts += 1
            if self.starts > 1:
                self._tell(LIST_CHANGED)  # a new process: its tools may be new
            while True:  # a ping that fails or hangs ends the session: started again
                await asyncio.sleep(PING_EVERY_S)
                with anyio.fail_after(PING_TIMEOUT_S):
                    await session.send_ping()

    async def _heard(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._tell(LIST_CHANGED)

    def _tell(self, message: dict[str, Any]) -> None:
        for queue in self.listeners:
            queue.put_nowait(message)

    async def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The server's result for one request (`RuntimeError` when it is not running)."""
        session = self.session
        if session is None:
            raise RuntimeError("the MCP server is not running")
        request: Any
        result_type: Any
        if method == "ping":
            await session.send_ping()
            return {}
        if method == "tools/list":
            request = types.ListToolsRequest(params=types.PaginatedRequestParams(**params))
            result_type = types.ListToolsResult
        elif method == "tools/call":
            request = types.CallToolRequest(params=types.CallToolRequestParams(**params))
            result_type = types.CallToolResult
        else:
            raise LookupError(method)
        result = await session.send_request(request, result_type, CALL_TIMEOUT_S)
        return dict(result.model_dump(mode="json", by_alias=True, exclude_none=True))
