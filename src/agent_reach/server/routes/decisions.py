"""Recent routing decisions, with their candidates and factor scores."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from agent_reach.server.auth import authenticated
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(
    prefix="/v1/decisions", tags=["observability"], dependencies=[Depends(authenticated)]
)


@router.get("")
async def recent_decisions(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    trace_id: str | None = None,
    agent_id: Annotated[str | None, Query(description="the chosen agent or a candidate")] = None,
) -> Response:
    """The newest decisions this coordinator made, newest first."""
    log = runtime_of(request).routing.decision_log
    return json_response({"decisions": log.recent(limit, trace_id=trace_id, agent_id=agent_id)})
