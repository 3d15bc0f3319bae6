"""Capabilities and routing decisions (nothing is invoked here)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from agent_reach.model.invocations import RouteRequest
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(prefix="/v1", tags=["routing"])


@router.get("/capabilities")
async def capabilities(request: Request) -> Response:
    """Capability -> ids of its live instances."""
    return json_response({"capabilities": runtime_of(request).registry.capabilities()})


@router.post("/route")
async def route(body: RouteRequest, request: Request) -> Response:
    """The routing decision, fully explained; `agent_id` is null when nothing fits."""
    return json_response(await runtime_of(request).routing.route(body))
