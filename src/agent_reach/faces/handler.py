"""What the A2A and MCP faces ask of the coordinator: `FaceHandler`, and nothing more.

As a2a-python's `RequestHandler` serves its JSON-RPC, REST and gRPC bindings, one narrow
handler serves every binding of the faces here (the FastAPI routes, the MCP SDK's server,
the edge's fast path): they authenticate a caller, invoke for it, list what it may invoke
(`catalog`), keep A2A tasks and check a push URL through it. The server implements it on
a running coordinator (`server/face_handler.py`); the faces never see the runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from starlette.requests import Request

    from agent_reach.backends.protocols import A2AStore, Claim
    from agent_reach.clock import Clock
    from agent_reach.config import Settings
    from agent_reach.faces.catalog import Catalog
    from agent_reach.identity.certificates import PeerCertificate
    from agent_reach.identity.origins import OriginGuard
    from agent_reach.model.invocations import InvokeRequest
    from agent_reach.model.keys import Principal
    from agent_reach.observability.tracecontext import TraceContext
    from agent_reach.wire.answer import Answer
    from agent_reach.wire.pool import HttpPool


class FaceHandler(Protocol):
    """The coordinator as the faces see it."""

    @property
    def settings(self) -> Settings:
        """The public URL, the body limit and the OAuth issuer the faces answer with."""

    @property
    def clock(self) -> Clock: ...

    @property
    def catalog(self) -> Catalog:
        """The live capabilities and who is offered which."""

    @property
    def secured(self) -> bool:
        """Whether callers need a credential (keys or tokens are on)."""

    @property
    def origins(self) -> OriginGuard:
        """The browser-origin check the edge's fast path applies before a face answers."""

    @property
    def a2a_store(self) -> A2AStore:
        """The A2A face's tasks and push configs."""

    @property
    def task_ttl_s(self) -> float:
        """How long a task (and its push configs) is kept."""

    @property
    def push_client(self) -> HttpPool:
        """The HTTP client push notifications are POSTed with."""

    async def authenticate(
        self,
        authorization: str | None,
        peer: PeerCertificate | None = None,
        *,
        resource: str | None = None,
    ) -> Principal:
        """The caller of a request's credential; a `ReachError` when it does not hold."""

    async def invoke(
        self, request: InvokeRequest, trace: TraceContext, principal: Principal, *, stream: bool
    ) -> Answer:
        """One invocation for `principal`, as `/v1/invoke` answers it."""

    async def board_task(self, principal: Principal, task_id: str) -> dict[str, Any]:
        """The caller's queued task as `GET /v1/tasks/{id}` shows it; `UnknownTask` if none."""

    async def invocation_record(self, principal: Principal, request_id: str) -> Claim | None:
        """The caller's request as its idempotency record keeps it; None when unknown."""

    async def check_url(self, url: str, field: str) -> None:
        """Refuse a URL the coordinator must not call (the endpoint guard's rules)."""


def handler_of(request: Request) -> FaceHandler:
    """The face handler of the app serving `request`."""
    handler: FaceHandler = request.app.state.faces
    return handler
