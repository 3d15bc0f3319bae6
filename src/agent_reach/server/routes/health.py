"""Liveness and metrics."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.responses import Response

from agent_reach.errors import StoreUnavailable
from agent_reach.server.auth import authenticated
from agent_reach.server.responses import json_response
from agent_reach.server.routes.queues import queue_depths
from agent_reach.server.runtime import runtime_of

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz(request: Request) -> Response:
    """The process is up and serving; it does not wait on the backend."""
    runtime = runtime_of(request)
    return json_response(
        {"status": "ok", "node": runtime.node_id, "backend": runtime.backends.name}
    )


@router.get("/metrics", dependencies=[Depends(authenticated)])
async def metrics(request: Request) -> Response:
    """Prometheus text format; gauges are read from the registry and queues at scrape time."""
    runtime = runtime_of(request)
    gauges = runtime.metrics
    counts = {"healthy": 0, "suspect": 0, "offline": 0}
    for view in runtime.registry.views():
        counts[view.status] += 1
    for state, count in counts.items():
        gauges.instances.labels(state).set(count)
    try:
        for queue, depth in (await queue_depths(runtime)).items():
            gauges.queue_depth.labels(queue).set(depth)
    except StoreUnavailable:
        pass  # the scrape still shows everything this process knows by itself
    return Response(gauges.render(), media_type=CONTENT_TYPE_LATEST)
