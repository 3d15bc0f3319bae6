"""Tasks (asynchronous and suspended requests) and the dead-letter queue.

A task is its caller's own: another principal's id reads as unknown. An admin reads
anyone's by naming its owner (`?owner=`). Dead letters show every principal's requests,
so only observers and admins read them.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response

from agent_reach.model.invocations import REQUEST_ID_PATTERN
from agent_reach.security.ownership import acting_for, require_observer
from agent_reach.server.auth import Caller, OwnerQuery
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(prefix="/v1", tags=["tasks"])


@router.get("/tasks/{task_id}")
async def get_task(
    task_id: Annotated[str, Path(pattern=REQUEST_ID_PATTERN)],
    request: Request,
    principal: Caller,
    owner: OwnerQuery = None,
) -> Response:
    """Status of one of the caller's asynchronous or suspended requests, and its answer."""
    tasks = runtime_of(request).tasks
    return json_response(await tasks.get(acting_for(principal, owner, "tasks"), task_id))


@router.get("/deadletters")
async def dead_letters(
    request: Request, principal: Caller, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> Response:
    """Requests refused for good (hop limit), newest first; never delivered again."""
    require_observer(principal)
    letters = runtime_of(request).dead_letters
    return json_response({"count": await letters.count(), "items": await letters.recent(limit)})
