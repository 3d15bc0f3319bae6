"""Recent routing decisions, with their candidates and factor scores.

Observers and admins see every decision; anyone else only those of its own requests.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from agent_reach.security.ownership import visible_owner
from agent_reach.server.auth import Caller
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(prefix="/v1/decisions", tags=["observability"])


@router.get("")
async def recent_decisions(
    request: Request,
    principal: Caller,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    trace_id: str | None = None,
    agent_id: Annotated[str | None, Query(description="the chosen agent or a candidate")] = None,
) -> Response:
    """The newest decisions this coordinator (`node`) made, newest first (the caller's own
    only, unless it is an observer or an admin)."""
    runtime = runtime_of(request)
    found = runtime.routing.decision_log.recent(
        limit, trace_id=trace_id, agent_id=agent_id, principal=visible_owner(principal)
    )
    return json_response({"node": runtime.node_id, "decisions": found})
