"""Capabilities and routing decisions (nothing is invoked here)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Request
from starlette.responses import Response

from agent_reach.faces.handler import handler_of
from agent_reach.ids import new_request_id
from agent_reach.invoke.checks import no_capability
from agent_reach.model.decisions import RankedCandidate, RouteDecision
from agent_reach.model.invocations import RankedRouteRequest
from agent_reach.observability.tracecontext import continue_trace
from agent_reach.routing.ranking import RankedCapability, schema_summary
from agent_reach.security.ownership import require_not_observer
from agent_reach.security.visibility import visible_capabilities
from agent_reach.server.auth import Caller, authenticated
from agent_reach.server.responses import JSON, dump_json, json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(prefix="/v1", tags=["routing"], dependencies=[Depends(authenticated)])


@router.get("/capabilities")
async def capabilities(request: Request, principal: Caller) -> Response:
    """Capability -> ids of its live instances, of the capabilities the key may use."""
    runtime = runtime_of(request)
    listing = runtime.registry.capabilities()
    return json_response(
        {"capabilities": visible_capabilities(listing, principal, runtime.security.may_use)}
    )


@router.post("/route")
async def route(
    body: RankedRouteRequest,
    request: Request,
    principal: Caller,
    traceparent: Annotated[str | None, Header()] = None,
) -> Response:
    """The routing decision, fully explained; `agent_id` is null when nothing fits.

    A capability nobody registered is 404 `no_capability`, as on `/v1/invoke` (the
    decision is in the error's `route`). Naming a capability needs the right to invoke
    it, naming a context the right to use it (else 404); text may be routed by any key
    but an observer's (observers only read). A text is routed among the capabilities
    the caller may invoke: no other is chosen, weighed as a candidate or named. For
    text, `ranked` lists the `top_k` of them that fit it best, whatever the decision.
    """
    require_not_observer(principal, "route")
    runtime = runtime_of(request)
    gate = runtime.gate
    if body.capability is not None:
        gate.authorize(principal, body.capability)
    if body.context_id is not None:  # its affinity would tell who served someone's context
        await gate.authorize_context(principal, body.context_id)
    trace = continue_trace(traceparent)
    decision = await runtime.routing.route(
        body,
        request_id=body.request_id or new_request_id(),
        trace_id=trace.trace_id,
        principal=principal.name,
        allowed=gate.routable(principal),
    )
    if body.capability is not None and decision.agent_id is None and decision.rule == "no_match":
        # as `/v1/invoke` answers it: nobody registered the capability
        raise no_capability(body.capability, trace_id=trace.trace_id, route=decision)
    if body.text is None:
        return json_response(decision, headers={"x-trace-id": trace.trace_id})
    catalog = handler_of(request).catalog
    ranked = await runtime.routing.ranking.rank(
        body.text,
        runtime.policy(),
        lambda tag: catalog.offers(principal, tag),
        body.top_k,
    )
    return Response(
        _with_ranked(decision, ranked), media_type=JSON, headers={"x-trace-id": trace.trace_id}
    )


def _with_ranked(decision: RouteDecision, ranked: list[RankedCapability]) -> bytes:
    """The decision's JSON object with `ranked` as its last member."""
    listed = [
        RankedCandidate(
            r.capability,
            r.confidence,
            r.similarity,
            r.description,
            schema_summary(r.input_schema),
        )
        for r in ranked
    ]
    # the decision is a JSON object, so it ends with its closing brace: the members
    # are joined as bytes rather than the decision rebuilt as a dict to add one
    return dump_json(decision)[:-1] + b',"ranked":' + dump_json(listed) + b"}"
