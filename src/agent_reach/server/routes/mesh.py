"""The mesh's routes: the delegation tokens' public keys, and the kill switch."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from starlette.responses import Response

from agent_reach.errors import UnknownAgent
from agent_reach.model.agents import AGENT_ID_PATTERN
from agent_reach.server.auth import Admin
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(tags=["mesh"])
AgentIdPath = Annotated[str, Path(pattern=AGENT_ID_PATTERN)]
JWKS_PATH = "/.well-known/jwks.json"


@router.get(JWKS_PATH, summary="Public keys of delegation tokens")
async def jwks(request: Request) -> Response:
    """The keys a delegation token may be verified with now (RFC 7517), for agents."""
    keys = await runtime_of(request).mesh.tokens.keys.jwks()
    return json_response(keys, headers={"cache-control": "public, max-age=60"})


@router.post("/v1/agents/{agent_id}/disable", summary="Kill switch: take an agent out")
async def disable(agent_id: AgentIdPath, request: Request, admin: Admin) -> Response:
    """Out of routing on every coordinator within a second, its delegation tokens
    refused at once, staying out if it registers again; requests in flight finish."""
    return await _switch(request, agent_id, admin.name, disabled=True)


@router.post("/v1/agents/{agent_id}/enable", summary="Kill switch: put an agent back")
async def enable(agent_id: AgentIdPath, request: Request, admin: Admin) -> Response:
    """Back in routing (when live) on every coordinator within a second."""
    return await _switch(request, agent_id, admin.name, disabled=False)


async def _switch(request: Request, agent_id: str, by: str, *, disabled: bool) -> Response:
    runtime = runtime_of(request)
    switch = runtime.mesh.switch
    if disabled and await runtime.registry.record_of(agent_id) is None:
        raise UnknownAgent(f"no agent {agent_id!r} is registered")
    changed = await switch.set(agent_id, disabled=disabled, by=by)
    runtime.events.publish(
        "kill_switch", {"agent_id": agent_id, "disabled": disabled, "by": by, "changed": changed}
    )
    return json_response({"agent_id": agent_id, "disabled": disabled, "changed": changed})
