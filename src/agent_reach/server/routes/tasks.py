"""Tasks (asynchronous and suspended requests) and the dead-letter queue.

A task is its caller's own: another principal's id reads as unknown. An admin reads
anyone's by naming its owner (`?owner=`). Dead letters show every principal's requests,
so only observers and admins read them.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response

from agent_reach.errors import Forbidden
from agent_reach.model.invocations import REQUEST_ID_PATTERN
from agent_reach.model.keys import Principal
from agent_reach.security.ownership import is_admin, require_observer
from agent_reach.server.auth import Caller
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(prefix="/v1", tags=["tasks"])
OwnerQuery = Annotated[
    str | None,
    Query(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$",
        description="admins only: the principal whose task this is",
    ),
]


@router.get("/tasks/{task_id}")
async def get_task(
    task_id: Annotated[str, Path(pattern=REQUEST_ID_PATTERN)],
    request: Request,
    principal: Caller,
    owner: OwnerQuery = None,
) -> Response:
    """Status of one of the caller's asynchronous or suspended requests, and its answer."""
    return json_response(await runtime_of(request).tasks.get(_owner(principal, owner), task_id))


@router.get("/deadletters")
async def dead_letters(
    request: Request, principal: Caller, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> Response:
    """Requests refused for good (hop limit), newest first; never delivered again."""
    require_observer(principal)
    letters = runtime_of(request).dead_letters
    return json_response({"count": await letters.count(), "items": await letters.recent(limit)})


def _owner(principal: Principal, owner: str | None) -> Principal:
    """Whose tasks to look in: the caller's own, or (for an admin) the named owner's."""
    if owner is None or owner.lower() == principal.name:
        return principal
    if not is_admin(principal):
        raise Forbidden("only an admin reads another principal's tasks")
    return Principal(principal.key_id, owner.lower(), None, "caller")
