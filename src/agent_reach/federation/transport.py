"""The `mcp` transport: an MCP server (streamable HTTP) as the instance of its tools.

At registration the server's tool list is read and each tool becomes a capability
(`federation/tools.py`); a delivery is one `tools/call` in the instance's kept session
(`federation/session.py`), a probe one `ping`. The tool's arguments are the params
pulled from the text (with the caller's payload fields), else the payload.

Never twice: a tool call has no request id the server could deduplicate by, so once
it may have reached the server (it was written, then the connection died or no answer
came in time) it fails final, `outcome_unknown`, and the attempt loop sends it nowhere
again. Only a call that provably never left (connect refused, a session the server
had forgotten: 404) is sent again.

Why our own small client rather than the `mcp` SDK's `ClientSession` over its
streamable HTTP client: that client keeps a session inside one `async with` in one
task, on its own httpx client, and reports a connection lost after the write the
same way as one lost before it. Ours runs on the delivery pool, so the endpoint
guard's dial-time check and the delivery TLS context apply to every connection,
the pool's "fully sent" flag decides what may be sent again, and a session outlives
any one request. The SDK's protocol versions (`mcp_types.version`) are the ones
negotiated. A stdio server runs behind the sidecar, whose bridge uses the SDK's
stdio client (`sidecar/mcp_bridge.py`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent_reach.errors import AgentFailed, AgentTimeout, ReachError, ValidationFailed
from agent_reach.federation.follower import ToolListFollower
from agent_reach.federation.results import result_of
from agent_reach.federation.sessions import McpSessions, read_tools
from agent_reach.federation.tools import TOOL_OF_FIELD, Taken, expand, names_of
from agent_reach.model.agents import AgentSpec, TransportSpec
from agent_reach.model.delivery import Delivery
from agent_reach.registry.service import Registry
from agent_reach.wire import pool
from agent_reach.wire.http_body import Shaped
from agent_reach.wire.urls import check_http_url

REGISTER_TIMEOUT_S = 10.0  # initialize and tools/list at registration


class McpTransport:
    """Deliveries as `tools/call` over the pooled client, one session per instance."""

    def __init__(self, client: pool.HttpPool) -> None:
        self.sessions = McpSessions(client)
        self.follower: ToolListFollower | None = None

    def follow(self, registry: Registry) -> None:
        """Re-register an instance whose server says its tools changed."""
        self.follower = ToolListFollower(self.sessions, registry)

    def check(self, spec: TransportSpec) -> None:
        check_http_url(spec.endpoint)
        names_of(spec.model_extra or {})

    async def complete(self, spec: AgentSpec, taken: Taken) -> AgentSpec:
        """The registration with the server's tools as its capabilities (422 when the
        server cannot be read, 409 `capability_name_taken` when a name is another's)."""
        if spec.capabilities:
            raise ValidationFailed(
                "an MCP server's capabilities are its tools: leave capabilities out "
                "(rename or leave out tools in transport.tools)",
                field="capabilities",
            )
        self.check(spec.transport)
        session = self.sessions.of(spec.transport, spec.id)
        deadline = asyncio.get_running_loop().time() + REGISTER_TIMEOUT_S
        try:
            tools = await read_tools(session, deadline)
        except ReachError as exc:
            await self.sessions.forget(spec.id)
            raise ValidationFailed(
                f"the MCP server's tools could not be read: {exc.message}",
                code="mcp_server_unreachable",
                field="transport.endpoint",
            ) from None
        return expand(spec, tools, session.server, taken, strict=True)

    async def deliver(
        self, spec: TransportSpec, delivery: Delivery, *, traceparent: str, timeout_s: float
    ) -> Shaped:
        tool = ((spec.model_extra or {}).get(TOOL_OF_FIELD) or {}).get(delivery.capability)
        if not isinstance(tool, str):
            raise AgentFailed(
                f"the MCP server no longer offers {delivery.capability!r}",
                code="mcp_error",
                retryable=False,
            )
        deadline = asyncio.get_running_loop().time() + timeout_s
        headers = [("x-request-id", delivery.request_id), ("traceparent", traceparent)]
        params = {"name": tool, "arguments": _arguments(delivery)}
        try:
            result = await self.sessions.of(spec).call(
                "tools/call", params, deadline=deadline, headers=headers
            )
        except AgentFailed as exc:
            if isinstance(exc, AgentTimeout) or exc.outcome_unknown:
                exc.retryable = False  # the tool may have run
            raise
        return result_of(result)

    async def probe(self, spec: TransportSpec, *, timeout_s: float) -> bool:
        deadline = asyncio.get_running_loop().time() + timeout_s
        try:
            await self.sessions.of(spec).call("ping", None, deadline=deadline)
        except ReachError:
            return False
        return True

    async def aclose(self) -> None:
        """The sessions end; the pooled client belongs to the `http` transport."""
        if self.follower is not None:
            await self.follower.aclose()
        await self.sessions.aclose()


def _arguments(delivery: Delivery) -> dict[str, Any]:
    """The params from the text (the caller's payload fields included), else the payload."""
    if delivery.params is not None:
        return delivery.params
    return delivery.payload if isinstance(delivery.payload, dict) else {}
