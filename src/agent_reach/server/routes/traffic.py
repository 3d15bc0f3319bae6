"""The last 15 minutes of this coordinator's traffic, for the dashboard's charts
(observers and admins: it covers every principal's requests).

Each coordinator answers with its own node's series: behind a load balancer, the
dashboard of one node charts the requests that node handled.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from agent_reach.observability.timeseries import Kind
from agent_reach.server.auth import observer
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(prefix="/v1/traffic", tags=["observability"], dependencies=[Depends(observer)])


KINDS: dict[str | None, tuple[Kind, ...]] = {
    None: ("capabilities", "instances"),
    "capability": ("capabilities",),
    "instance": ("instances",),
}


@router.get("")
async def recent_traffic(
    request: Request,
    by: Annotated[
        Literal["capability", "instance"] | None,
        Query(description="only the series per capability, or only those per instance"),
    ] = None,
) -> Response:
    """Per `bucket_s` bucket over the last `window_s` (bucket starts in `times`, wall
    seconds): requests per capability and attempts per instance (`requests`, `errors`,
    `refusals`, `p50_ms`, `p99_ms`), the requests' `total`, and the text routing
    decisions by best confidence and by margin, with the policy's thresholds."""
    runtime = runtime_of(request)
    policy = runtime.policy()
    series = runtime.metrics.recent.snapshot(runtime.clock.wall(), KINDS[by])
    series["routing"]["min_confidence"] = policy.min_confidence
    series["routing"]["margin_threshold"] = policy.margin
    return json_response({"node": runtime.node_id, **series})
