"""Agents: register, heartbeat, deregister, list."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response

from agent_reach.errors import ValidationFailed
from agent_reach.model.agents import AGENT_ID_PATTERN, AgentSpec, HealthStatus, InstanceView
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(prefix="/v1/agents", tags=["agents"])
AgentIdPath = Annotated[str, Path(pattern=AGENT_ID_PATTERN)]


@router.post("", status_code=201, response_model=InstanceView)
async def register(spec: AgentSpec, request: Request) -> Response:
    """Register (or re-register) an instance and start its lease."""
    runtime = runtime_of(request)
    runtime.transports.check(spec.transport)
    classes = runtime.policy().timeout_classes
    if spec.timeout_class not in classes:
        raise ValidationFailed(
            f"unknown timeout class {spec.timeout_class!r}: use one of {sorted(classes)}",
            field="timeout_class",
        )
    await runtime.registry.register(spec)
    return json_response(runtime.registry.get(spec.id), 201)


@router.post("/{agent_id}/heartbeat")
async def heartbeat(agent_id: AgentIdPath, request: Request) -> Response:
    """Renew the lease; 404 `unknown_agent` tells the agent to register again."""
    ttl_s = await runtime_of(request).registry.heartbeat(agent_id)
    return json_response({"id": agent_id, "ttl": ttl_s})


@router.delete("/{agent_id}", status_code=204)
async def deregister(agent_id: AgentIdPath, request: Request) -> Response:
    """Take the instance out of the pool at once."""
    await runtime_of(request).registry.deregister(agent_id)
    return Response(status_code=204)


@router.get("", response_model=dict[str, list[InstanceView]])
async def list_agents(
    request: Request,
    capability: str | None = None,
    status: Annotated[HealthStatus | None, Query()] = None,
) -> Response:
    """Instances with status, load, success rate and latency, optionally filtered."""
    views = runtime_of(request).registry.views()
    if capability is not None:
        tag = capability.strip().lower()
        views = [v for v in views if tag in v.capabilities]
    if status is not None:
        views = [v for v in views if v.status == status]
    return json_response({"agents": sorted(views, key=lambda v: v.id)})


@router.get("/{agent_id}", response_model=InstanceView)
async def get_agent(agent_id: AgentIdPath, request: Request) -> Response:
    return json_response(runtime_of(request).registry.get(agent_id))
