"""Tasks (asynchronous and suspended requests) and the dead-letter queue."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from starlette.responses import Response

from agent_reach.model.invocations import REQUEST_ID_PATTERN
from agent_reach.server.auth import Caller, authenticated
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(prefix="/v1", tags=["tasks"], dependencies=[Depends(authenticated)])


@router.get("/tasks/{task_id}")
async def get_task(
    task_id: Annotated[str, Path(pattern=REQUEST_ID_PATTERN)], request: Request, principal: Caller
) -> Response:
    """Status of one of the caller's asynchronous or suspended requests, and its answer."""
    return json_response(await runtime_of(request).tasks.get(principal, task_id))


@router.get("/deadletters")
async def dead_letters(
    request: Request, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> Response:
    """Requests refused for good (hop limit), newest first; never delivered again."""
    letters = runtime_of(request).dead_letters
    return json_response({"count": await letters.count(), "items": await letters.recent(limit)})
