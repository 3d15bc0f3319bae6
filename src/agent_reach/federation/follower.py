"""The tool-list follower: when a server's tools change, so do its capabilities.

Told by the sessions (a `notifications/tools/list_changed`, a listening stream opened
(what was said before it went unheard), or a session begun again
after the server restarted), it reads the instance's tool list and, when the
capabilities or their cards differ, registers the instance again with them (same
owner). A tool whose name is now taken is left out, not the whole server.
"""

from __future__ import annotations

import asyncio

import structlog

from agent_reach.errors import ReachError
from agent_reach.federation.sessions import McpSessions, read_tools
from agent_reach.federation.tools import expand, taken_in
from agent_reach.registry.service import Registry

log = structlog.get_logger("agent_reach.federation")

READ_TIMEOUT_S = 10.0  # one tools/list, page by page: a catalog is small


class ToolListFollower:
    """One re-read at a time per instance; a change told meanwhile reads once more."""

    def __init__(self, sessions: McpSessions, registry: Registry) -> None:
        self.sessions = sessions
        self.registry = registry
        self._reading: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        sessions.tools_changed = self.changed
        sessions.is_registered = lambda instance: instance in registry.index.by_id

    def changed(self, instance: str) -> None:
        if instance in self._reading:
            self._again.add(instance)
            return
        task = asyncio.get_running_loop().create_task(self._follow(instance))
        self._reading[instance] = task

    async def aclose(self) -> None:
        for task in list(self._reading.values()):
            task.cancel()
        await asyncio.gather(*self._reading.values(), return_exceptions=True)

    async def _follow(self, instance: str) -> None:
        try:
            while True:
                self._again.discard(instance)
                await self._reread(instance)
                if instance not in self._again:
                    return
        finally:
            del self._reading[instance]

    async def _reread(self, agent_id: str) -> None:
        found = self.registry.index.by_id.get(agent_id)
        if found is None:  # deregistered: its session goes too
            await self.sessions.forget(agent_id)
            return
        spec = found.spec
        session = self.sessions.of(spec.transport, agent_id)
        deadline = asyncio.get_running_loop().time() + READ_TIMEOUT_S
        try:
            tools = await read_tools(session, deadline)
            renewed = expand(
                spec, tools, session.server, taken_in(self.registry.index, agent_id), strict=False
            )
        except ReachError as exc:
            log.warning("mcp_tools_unread", agent_id=agent_id, code=exc.code, error=exc.message)
            return
        if renewed.capabilities == spec.capabilities and renewed.skills == spec.skills:
            return
        await self.registry.register(renewed, found.record.owner)
        log.info("mcp_tools_changed", agent_id=agent_id, capabilities=renewed.capabilities)
