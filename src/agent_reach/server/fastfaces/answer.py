"""The A2A and MCP faces' common requests without the framework, for the edge server.

Measured (bench/faces.py): through FastAPI, and for `/mcp` through the MCP SDK's
streamable-HTTP layer, an A2A message send cost 2-3x `/v1/invoke`'s CPU per request,
an MCP tool call 4-6x and one inside a handshake-era session 4.5-8.4x, for the same
delivery; here each costs 1.1-1.5x (the session call 1.15-1.39x). The edge server
hands three requests here with the body it has read: `POST /a2a` (JSON-RPC, every
method but the streaming ones), `POST /a2a/message:send` (`a2a`), and `POST /mcp`
carrying a `tools/call`, either 2026-07-28 (the per-request envelope, `mcp`) or
inside a handshake-era session the MCP face opened (`mcp_session`). `answer_face`
answers them with the faces' own functions (`a2a_rpc.answer_rpc`,
`a2a_rest.send_answer`, `mcp_tools.call_tool`) and the SDK's own validation and result
shaping, so the answer is the one the full stack gives, byte for byte; or returns None
before anything is invoked, and the request goes to the ASGI app as it is. It returns
None for whatever it does not answer exactly as the full stack would: a foreign Origin,
oversized headers, streaming methods, an MCP request other than a `tools/call`, an
unknown or ended session or another principal's, a header or envelope the SDK would
refuse, `Mcp-Param-*` headers or a tool schema declaring them, another Accept or
Content-Type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_reach.errors import ReachError
from agent_reach.identity.certificates import PeerCertificate
from agent_reach.server.fastfaces.a2a import a2a_rpc, a2a_send
from agent_reach.server.fastfaces.mcp import modern_call
from agent_reach.server.fastfaces.mcp_session import session_call
from agent_reach.server.fastfaces.wire import FaceAnswer, Headers, OnSlow, Request, read_head
from agent_reach.server.limits import check_headers

if TYPE_CHECKING:
    from agent_reach.faces.handler import FaceHandler
    from agent_reach.faces.mcp_server import McpFace

A2A_RPC, A2A_SEND, MCP = b"/a2a", b"/a2a/message:send", b"/mcp"


@dataclass(frozen=True, slots=True)
class FaceRoutes:
    """The faces of one running coordinator, as the edge server calls them."""

    handler: FaceHandler
    mcp: McpFace

    async def answer(
        self,
        path: bytes,
        headers: Headers,
        body: bytes,
        peer: PeerCertificate | None,
        tls: bool,
        local: tuple[str, int],
        on_slow: OnSlow,
    ) -> FaceAnswer | None:
        """`answer_face` for a request's head and body."""
        request = read_head(headers, peer, tls, local)
        return await answer_face(self.handler, self.mcp, path, request, body, on_slow)


async def answer_face(
    handler: FaceHandler, mcp: McpFace, path: bytes, request: Request, body: bytes, on_slow: OnSlow
) -> FaceAnswer | None:
    """The answer to a request for `path` (one of the three), or None: the full stack's."""
    try:
        check_headers(len(request.headers), sum(len(n) + len(v) for n, v in request.headers))
        handler.origins.check(path.decode(), request.host, request.origin)
    except ReachError:
        return None
    if request.authorizations > 1:
        return None
    if path == MCP:
        if request.session_ids:
            return await session_call(handler, mcp, request, body, on_slow)
        return await modern_call(handler, mcp, request, body, on_slow)
    if path == A2A_SEND:
        return await a2a_send(handler, request, body)
    return await a2a_rpc(handler, request, body)
