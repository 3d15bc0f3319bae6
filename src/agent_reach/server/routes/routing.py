"""Capabilities and routing decisions (nothing is invoked here)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Request
from starlette.responses import Response

from agent_reach.ids import new_request_id
from agent_reach.model.invocations import RouteRequest
from agent_reach.observability.tracecontext import continue_trace
from agent_reach.security.ownership import require_not_observer
from agent_reach.server.auth import Caller, Observer, authenticated
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(prefix="/v1", tags=["routing"], dependencies=[Depends(authenticated)])


@router.get("/capabilities")
async def capabilities(request: Request) -> Response:
    """Capability -> ids of its live instances."""
    return json_response({"capabilities": runtime_of(request).registry.capabilities()})


@router.post("/route")
async def route(
    body: RouteRequest,
    request: Request,
    principal: Caller,
    traceparent: Annotated[str | None, Header()] = None,
) -> Response:
    """The routing decision, fully explained; `agent_id` is null when nothing fits.

    Naming a capability needs the right to invoke it; text may be routed by any key but
    an observer's (observers only read).
    """
    require_not_observer(principal, "route")
    if body.capability is not None:
        runtime_of(request).security.authorize_invoke(principal, body.capability)
    trace = continue_trace(traceparent)
    decision = await runtime_of(request).routing.route(
        body,
        request_id=body.request_id or new_request_id(),
        trace_id=trace.trace_id,
        principal=principal.name,
    )
    return json_response(decision, headers={"x-trace-id": trace.trace_id})


@router.get("/policy")
async def policy(request: Request, _: Observer) -> Response:
    """The routing policy in force, its version and where it came from (observers and
    admins: it names every principal's rules and quotas)."""
    return json_response(runtime_of(request).policy.status())
