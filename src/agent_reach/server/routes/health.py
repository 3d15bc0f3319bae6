"""Liveness."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz(request: Request) -> Response:
    """The process is up and serving; it does not wait on the backend."""
    runtime = runtime_of(request)
    return json_response(
        {"status": "ok", "node": runtime.node_id, "backend": runtime.backends.name}
    )
