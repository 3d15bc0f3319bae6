"""One request explained: `GET /v1/requests/{request_id}/why`, the troubleshooting walk."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request
from starlette.responses import Response

from agent_reach.errors import NotFound
from agent_reach.model.invocations import REQUEST_ID_PATTERN
from agent_reach.server.auth import Caller, authenticated
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of
from agent_reach.troubleshooting.shared import find_everywhere
from agent_reach.troubleshooting.walk import may_walk, walk

router = APIRouter(
    prefix="/v1/requests", tags=["observability"], dependencies=[Depends(authenticated)]
)


@router.get("/{request_id:path}/why")
async def why(
    request_id: Annotated[str, Path(pattern=REQUEST_ID_PATTERN)],
    request: Request,
    principal: Caller,
) -> Response:
    """Routing, registry, context, delivery of one request, and the first step that looks
    wrong; the caller's own requests only (observers and admins: every request).
    On a shared store, a request another coordinator answered is found there too.
    404 `unknown_request` once evicted, expired, or not visible to the caller."""
    runtime = runtime_of(request)
    found = await find_everywhere(runtime.journal, request_id)
    entries = [e for e in found if may_walk(principal, e)]
    if not entries:
        where = "any coordinator" if runtime.journal.shared else "this coordinator"
        raise NotFound(
            f"no request {request_id} answered on {where} for this caller",
            code="unknown_request",
        )
    runtime.history.sample()  # an instance registered since the last sample gets its first
    return json_response(walk(entries[-1], runtime.history, principal))
