"""Liveness and metrics."""

from __future__ import annotations

from typing import Annotated, get_args

from fastapi import APIRouter, Header, Request
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.responses import Response

from agent_reach.errors import StoreUnavailable
from agent_reach.model.agents import HealthStatus
from agent_reach.server.auth import check_one_authorization
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


@router.get("/metrics")
async def metrics(
    request: Request, authorization: Annotated[str | None, Header()] = None
) -> Response:
    """Prometheus text format; gauges are read from the registry and queues at scrape time.

    Needs the scrape token (`AR_METRICS_TOKEN`) or an observer or admin key.
    """
    check_one_authorization(request)
    runtime = runtime_of(request)
    await runtime.security.authorize_scrape(authorization)
    gauges = runtime.metrics
    counts = dict.fromkeys(get_args(HealthStatus), 0)
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
