"""Every MCP session this coordinator holds: one per registered instance.

A session is made at the instance's first use here (its registration, a probe or a
delivery) and kept; a new endpoint for the same instance gets a new session. What a
server says unasked goes to `tools_changed` (the tool-list follower) with the
instance's id.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agent_reach.errors import AgentFailed
from agent_reach.federation.session import GONE, LISTENING, McpSession
from agent_reach.federation.tools import INSTANCE_FIELD, MAX_TOOLS
from agent_reach.model.agents import TransportSpec
from agent_reach.wire import pool

LIST_CHANGED = "notifications/tools/list_changed"
INITIALIZED = "initialized"  # a session begun again: its server may have new tools


class McpSessions:
    """Sessions by instance id (the endpoint, for a registration not yet completed)."""

    def __init__(self, client: pool.HttpPool) -> None:
        self.client = client
        self.tools_changed: Callable[[str], None] | None = None
        self.is_registered: Callable[[str], bool] = lambda instance: True
        self._sessions: dict[str, McpSession] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def of(self, transport: TransportSpec, instance: str | None = None) -> McpSession:
        """The instance's session (made now when there is none for its endpoint)."""
        key = instance or str(
            (transport.model_extra or {}).get(INSTANCE_FIELD) or transport.endpoint
        )
        session = self._sessions.get(key)
        if session is not None and session.endpoint == transport.endpoint:
            return session
        if session is not None:
            self._close_later(session)

        def said(what: str) -> None:
            if what == GONE:
                if self._sessions.get(key) is session:
                    del self._sessions[key]
            elif what in (LIST_CHANGED, INITIALIZED, LISTENING) and self.tools_changed is not None:
                self.tools_changed(key)

        session = McpSession(self.client, transport.endpoint, said, lambda: self.is_registered(key))
        self._sessions[key] = session
        return session

    async def forget(self, instance: str) -> None:
        session = self._sessions.pop(instance, None)
        if session is not None:
            await session.close()

    async def aclose(self) -> None:
        for session in self._sessions.values():
            await session.close()
        self._sessions.clear()
        for task in list(self._closing):
            await task

    def _close_later(self, session: McpSession) -> None:
        task = asyncio.get_running_loop().create_task(session.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)


async def read_tools(session: McpSession, deadline: float) -> list[dict[str, Any]]:
    """Every tool the server lists (`tools/list`, page by page), up to `MAX_TOOLS`."""
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    while len(tools) < MAX_TOOLS:
        result = await session.call(
            "tools/list", {"cursor": cursor} if cursor else None, deadline=deadline
        )
        page = result.get("tools")
        if not isinstance(page, list):
            raise AgentFailed(
                "the MCP server's tools/list answer has no tools", code="agent_bad_answer"
            )
        tools.extend(t for t in page if isinstance(t, dict))
        cursor = result.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            break
    return tools
