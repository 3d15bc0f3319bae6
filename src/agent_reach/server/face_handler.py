"""The faces' `FaceHandler` on a running coordinator: what the A2A and MCP faces may ask
of its parts, and nothing else (`faces/handler.py`)."""

from __future__ import annotations

from typing import Any

from agent_reach.backends.protocols import Claim
from agent_reach.faces.catalog import Catalog
from agent_reach.identity.certificates import PeerCertificate
from agent_reach.model.invocations import InvokeRequest
from agent_reach.model.keys import Principal, owned_key
from agent_reach.observability.tracecontext import TraceContext
from agent_reach.routing.ranking import Allowed, RankedCapability
from agent_reach.server.runtime import Runtime
from agent_reach.wire.answer import Answer
from agent_reach.wire.pool import HttpPool


class CoordinatorFaces:
    """`FaceHandler` for one running coordinator: made once when it starts."""

    def __init__(self, runtime: Runtime) -> None:
        security, routing = runtime.security, runtime.routing

        async def rank(text: str, allowed: Allowed, top_k: int) -> list[RankedCapability]:
            return await routing.ranking.rank(text, runtime.policy(), allowed, top_k)

        self.settings = runtime.settings
        self.clock = runtime.clock
        self.origins = security.origins
        self.catalog = Catalog(
            runtime.registry, runtime.gate.may_invoke, lambda: security.policy().access, rank
        )
        self.a2a_store = runtime.backends.a2a
        self.task_ttl_s = runtime.tasks.ttl_s
        self.push_client: HttpPool = runtime.transports.get("a2a").client  # type: ignore[attr-defined]
        self._security = security
        self._invoke = runtime.invoke
        self._tasks = runtime.tasks
        self._idempotency = runtime.backends.idempotency
        self._guard = security.guard

    @property
    def secured(self) -> bool:
        return self._security.enabled

    async def authenticate(
        self,
        authorization: str | None,
        peer: PeerCertificate | None = None,
        *,
        resource: str | None = None,
    ) -> Principal:
        return await self._security.authenticate(authorization, peer, resource=resource)

    async def invoke(
        self, request: InvokeRequest, trace: TraceContext, principal: Principal, *, stream: bool
    ) -> Answer:
        return await self._invoke.handle(request, trace, principal=principal, stream=stream)

    async def board_task(self, principal: Principal, task_id: str) -> dict[str, Any]:
        return await self._tasks.get(principal, task_id)

    async def invocation_record(self, principal: Principal, request_id: str) -> Claim | None:
        return await self._idempotency.peek(owned_key(principal, request_id))

    async def check_url(self, url: str, field: str) -> None:
        await self._guard.check_url(url, field)
