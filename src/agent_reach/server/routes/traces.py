"""Traces: every hop of a request, from this coordinator's in-process trace store."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from starlette.responses import Response

from agent_reach.errors import NotFound
from agent_reach.observability.trace_store import TraceFilter
from agent_reach.server.auth import authenticated
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(
    prefix="/v1/traces", tags=["observability"], dependencies=[Depends(authenticated)]
)
TraceIdPath = Annotated[str, Path(pattern=r"^[0-9a-f]{32}$")]


@router.get("")
async def list_traces(
    request: Request,
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
    where = TraceFilter(capability=capability, status=status, min_ms=min_ms, agent_id=agent_id)
    return json_response({"stored": len(store), "traces": store.recent(where, limit)})


@router.get("/{trace_id}")
async def get_trace(trace_id: TraceIdPath, request: Request) -> Response:
    """The trace's summary and its spans in start order; 404 once evicted or never seen here."""
    trace = runtime_of(request).tracer.store.get(trace_id)
    if trace is None:
        raise NotFound(
            f"no trace {trace_id} on this coordinator (unknown or evicted)", code="unknown_trace"
        )
    return json_response(trace)
