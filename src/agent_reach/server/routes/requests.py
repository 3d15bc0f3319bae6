"""One request explained: `GET /v1/requests/{request_id}/why`, the troubleshooting walk."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request
from starlette.responses import Response

from agent_reach.errors import NotFound
from agent_reach.model.invocations import REQUEST_ID_PATTERN
from agent_reach.model.keys import Principal
from agent_reach.security.ownership import visible_owner
from agent_reach.server.auth import Caller, authenticated
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import Runtime, runtime_of
from agent_reach.troubleshooting.shared import find_everywhere
from agent_reach.troubleshooting.walk import may_walk, request_spans, walk

TRACE_ID = re.compile(r"[0-9a-f]{32}")
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
    404 `unknown_request` once evicted, expired, or not visible to the caller; given the
    id of a trace instead, its `request_ids` (those this coordinator knows) come with it."""
    runtime = runtime_of(request)
    found = await find_everywhere(runtime.journal, request_id)
    entries = [e for e in found if may_walk(principal, e)]
    if not entries:
        where = "any coordinator" if runtime.journal.shared else "this coordinator"
        in_trace = _requests_of_trace(runtime, request_id, principal)
        if in_trace:
            raise NotFound(
                f"{request_id} is a trace id, not a request id: its requests are "
                f"{', '.join(in_trace)}",
                code="unknown_request",
                trace_id=request_id,
                request_ids=in_trace,
            )
        raise NotFound(
            f"no request {request_id} answered on {where} for this caller",
            code="unknown_request",
        )
    runtime.history.sample()  # an instance registered since the last sample gets its first
    entry = entries[-1]
    trace = runtime.tracer.store.get(entry.trace_id, visible_owner(principal))
    spans = request_spans(trace, entry.request_id)
    return json_response(walk(entry, runtime.history, principal, spans, trace))


def _requests_of_trace(runtime: Runtime, trace_id: str, principal: Principal) -> list[str]:
    """The ids of the requests in trace `trace_id` that the caller may walk, in order:
    from this coordinator's journal and trace store."""
    if not TRACE_ID.fullmatch(trace_id):
        return []
    ids = [e.request_id for e in runtime.journal.of_trace(trace_id) if may_walk(principal, e)]
    trace = runtime.tracer.store.get(trace_id, visible_owner(principal))
    for span in trace["spans"] if trace else []:
        if span["kind"] == "invoke" and span["note"]:
            ids.append(span["note"])
    return list(dict.fromkeys(ids))
