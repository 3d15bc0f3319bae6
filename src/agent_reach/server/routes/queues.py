"""Queue depths: asynchronous work, suspended requests, dead letters (observers, admins)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from agent_reach.invoke.tasks import SUSPENDED, WORK
from agent_reach.server.auth import observer
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import Runtime, runtime_of

router = APIRouter(prefix="/v1/queues", tags=["tasks"], dependencies=[Depends(observer)])


async def queue_depths(runtime: Runtime) -> dict[str, int]:
    """Entries waiting in each queue; raises `StoreUnavailable` when the backend is down."""
    return {
        WORK: await runtime.tasks.depth(WORK),
        SUSPENDED: await runtime.tasks.depth(SUSPENDED),
        "deadletters": await runtime.dead_letters.count(),
    }


@router.get("")
async def depths(request: Request) -> Response:
    """How many entries wait in each queue (shared by every coordinator on the backend)."""
    return json_response(await queue_depths(runtime_of(request)))
