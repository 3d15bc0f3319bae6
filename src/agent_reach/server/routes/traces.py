"""Traces: every hop of a request, from this coordinator's in-process trace store.

Observers and admins see every trace whole. Anyone else sees the traces its requests
are part of, and of each only its own spans: a caller's invoke with its route and
attempts, but not the nested calls an agent made under it (those are the agent's).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response

from agent_reach.errors import NotFound
from agent_reach.observability.trace_store import TraceFilter
from agent_reach.security.ownership import visible_owner
from agent_reach.server.auth import Caller
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(prefix="/v1/traces", tags=["observability"])
TraceIdPath = Annotated[str, Path(pattern=r"^[0-9a-f]{32}$")]


@router.get("")
async def list_traces(
    request: Request,
    principal: Caller,
    capability: str | None = None,
    status: Annotated[
        str | None, Query(description="an outcome (ok, fallback, agent_timeout...) or `error`")
    ] = None,
    min_ms: Annotated[float | None, Query(ge=0)] = None,
    agent_id: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Response:
    """Summaries of recent traces, newest first, optionally filtered."""
    store = runtime_of(request).tracer.store
    owner = visible_owner(principal)
    where = TraceFilter(
        capability=capability, status=status, min_ms=min_ms, agent_id=agent_id, owner=owner
    )
    found = store.recent(where, limit)
    stored = len(store) if owner is None else len(found)
    return json_response({"stored": stored, "traces": found})


@router.get("/{trace_id}")
async def get_trace(trace_id: TraceIdPath, request: Request, principal: Caller) -> Response:
    """The trace's summary and its spans in start order; 404 once evicted, never seen
    here, or holding none of the caller's spans."""
    trace = runtime_of(request).tracer.store.get(trace_id, visible_owner(principal))
    if trace is None:
        raise NotFound(
            f"no trace {trace_id} on this coordinator (unknown or evicted)", code="unknown_trace"
        )
    return json_response(trace)
