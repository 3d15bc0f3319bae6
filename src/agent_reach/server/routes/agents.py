"""Agents: register, heartbeat, deregister, list.

Registering needs an agent (or admin) key whose rules grant every capability named;
an instance may then be renewed, replaced or removed only by the principal that
registered it (or an admin). Listing needs any valid key and shows what that key may
see (`security/visibility.py`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response

from agent_reach.adapters.transports.a2a import A2ATransport
from agent_reach.backends.protocols import InstanceRecord
from agent_reach.errors import Forbidden, UnknownAgent, ValidationFailed
from agent_reach.federation.tools import taken_in
from agent_reach.federation.transport import McpTransport
from agent_reach.invoke.negotiation import check_negotiate
from agent_reach.model.agents import (
    AGENT_ID_PATTERN,
    AgentCard,
    AgentSpec,
    HealthStatus,
    InstanceView,
)
from agent_reach.model.keys import Principal
from agent_reach.registry.cards import card_of
from agent_reach.security.visibility import visible_view
from agent_reach.server.auth import Caller
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(prefix="/v1/agents", tags=["agents"])
AgentIdPath = Annotated[str, Path(pattern=AGENT_ID_PATTERN)]


@router.post("", status_code=201, response_model=InstanceView)
async def register(spec: AgentSpec, request: Request, principal: Caller) -> Response:
    """Register (or re-register) an instance and start its lease."""
    runtime = runtime_of(request)
    security = runtime.security
    transport = runtime.transports.get(spec.transport.type)
    if isinstance(transport, A2ATransport | McpTransport):  # a card or a tool list
        # Before fetching anything: only agent and admin keys register (the card's own
        # capabilities are authorized once known).
        if principal.role not in ("agent", "admin"):
            raise Forbidden(f"a {principal.role} key may not register agents")
        security.authorize_register(principal, spec.capabilities)
        await security.check_endpoints(spec.transport)
        if isinstance(transport, McpTransport):  # its tools, named clear of everyone else's
            await runtime.registry.catch_up()
            spec = await transport.complete(spec, taken_in(runtime.registry.index, spec.id))
        else:
            spec = await transport.complete(spec, security.guard.check_url)
    security.authorize_register(principal, spec.capabilities)
    existing = await _check_owner(request, principal, spec.id)
    runtime.transports.check(spec.transport)
    await security.check_endpoints(spec.transport)
    await check_negotiate(spec, security.guard)
    classes = runtime.policy().timeout_classes
    if spec.timeout_class not in classes:
        raise ValidationFailed(
            f"unknown timeout class {spec.timeout_class!r}: use one of {sorted(classes)}",
            field="timeout_class",
        )
    # The first registrant owns the id; an admin re-registering it keeps that owner.
    owner = existing.owner if existing is not None else principal.name
    await runtime.registry.register(spec, owner if security.enabled else None)
    runtime.health.probe_soon([spec.id])  # `unknown` until a probe answers: ask at once
    return json_response(runtime.registry.get(spec.id), 201)


@router.post("/{agent_id}/heartbeat")
async def heartbeat(agent_id: AgentIdPath, request: Request, principal: Caller) -> Response:
    """Renew the lease; 404 `unknown_agent` tells the agent to register again."""
    runtime = runtime_of(request)
    await _check_owner(request, principal, agent_id)
    ttl_s = await runtime.registry.heartbeat(agent_id)
    return json_response({"id": agent_id, "ttl": ttl_s})


@router.delete("/{agent_id}", status_code=204)
async def deregister(agent_id: AgentIdPath, request: Request, principal: Caller) -> Response:
    """Take the instance out of the pool at once."""
    await _check_owner(request, principal, agent_id)
    await runtime_of(request).registry.deregister(agent_id)
    return Response(status_code=204)


@router.get("", response_model=dict[str, list[InstanceView]])
async def list_agents(
    request: Request,
    principal: Caller,
    capability: str | None = None,
    status: Annotated[HealthStatus | None, Query()] = None,
) -> Response:
    """Instances with status, load, success rate and latency, optionally filtered."""
    runtime = runtime_of(request)
    registry, may_use = runtime.registry, runtime.security.may_use
    views = [
        view
        for every in registry.views()
        if (view := visible_view(every, registry.owner_of(every.id), principal, may_use))
    ]
    if capability is not None:
        tag = capability.strip().lower()
        views = [v for v in views if tag in v.capabilities]
    if status is not None:
        views = [v for v in views if v.status == status]
    return json_response({"agents": sorted(views, key=lambda v: v.id)})


@router.get("/{agent_id}", response_model=InstanceView)
async def get_agent(agent_id: AgentIdPath, request: Request, principal: Caller) -> Response:
    """One instance; 404 as for an unknown one when the key may not see it."""
    return json_response(await _visible(request, principal, agent_id))


@router.get("/{agent_id}/card", response_model=AgentCard)
async def get_agent_card(agent_id: AgentIdPath, request: Request, principal: Caller) -> Response:
    """What the router matches the instance by: its description, examples and skills,
    only of the capabilities the key may see (as `GET /v1/agents/{id}`)."""
    view = await _visible(request, principal, agent_id)
    spec = runtime_of(request).registry.index.by_id[agent_id].spec
    return json_response(card_of(spec, view.capabilities))


async def _visible(request: Request, principal: Principal, agent_id: str) -> InstanceView:
    """The instance as the key may see it; 404 as for an unknown one when it may not."""
    runtime = runtime_of(request)
    registry = runtime.registry
    if agent_id not in registry.index.by_id:  # registered through another coordinator?
        await registry.catch_up()
    view = visible_view(
        registry.get(agent_id), registry.owner_of(agent_id), principal, runtime.security.may_use
    )
    if view is None:
        raise UnknownAgent(f"no agent {agent_id!r} is registered")
    return view


async def _check_owner(
    request: Request, principal: Principal, agent_id: str
) -> InstanceRecord | None:
    """403 unless the principal owns the instance; its record (None when unknown, so the
    registry answers its own 404)."""
    runtime = runtime_of(request)
    record = await runtime.registry.record_of(agent_id)
    if record is not None:
        runtime.security.authorize_owner(principal, record.owner, agent_id)
    return record
