"""Workflows: run a DAG of steps, read a run, list recent runs, save and run named ones."""

from __future__ import annotations

from typing import Annotated

import orjson
import yaml
from fastapi import APIRouter, Body, Depends, Header, Path, Query, Request
from pydantic import ValidationError
from starlette.responses import Response

from agent_reach.errors import InvalidRequest
from agent_reach.model.workflows import (
    NAME_PATTERN,
    RUN_ID_PATTERN,
    NamedRunRequest,
    WorkflowDefinition,
    WorkflowRequest,
)
from agent_reach.observability.tracecontext import continue_trace
from agent_reach.security.ownership import acting_for
from agent_reach.server.auth import Caller, OwnerQuery, authenticated
from agent_reach.server.errors import invalid_body
from agent_reach.server.responses import JSON, json_response
from agent_reach.server.runtime import runtime_of
from agent_reach.wire.answer import Answer

router = APIRouter(
    prefix="/v1/workflows", tags=["workflows"], dependencies=[Depends(authenticated)]
)

HopHeader = Annotated[int | None, Header(alias="x-reach-hop", ge=0, le=64)]
TraceHeader = Annotated[str | None, Header()]


@router.post("/run")
async def run_workflow(
    body: WorkflowRequest,
    request: Request,
    principal: Caller,
    traceparent: TraceHeader = None,
    hop: HopHeader = None,
) -> Response:
    """Run a workflow: 200 with every step once it ends, 202 with `poll` (async, parked).

    Refused at submission with 422, nothing executed: a cycle, an unknown dependency,
    a duplicate step id, too many steps, a template naming a step not depended on.
    """
    trace = continue_trace(traceparent)
    answer = await runtime_of(request).orchestrator.start_inline(
        body, principal, trace, hop_budget=hop
    )
    return _response(answer, trace.trace_id)


@router.get("")
async def recent_runs(
    request: Request, principal: Caller, limit: Annotated[int, Query(ge=1, le=200)] = 50
) -> Response:
    """The caller's newest runs (every caller's for admins), each with its step graph."""
    runs = await runtime_of(request).orchestrator.recent(principal, limit)
    return json_response({"runs": runs})


@router.get("/{run_id}")
async def get_run(
    run_id: Annotated[str, Path(pattern=RUN_ID_PATTERN)],
    request: Request,
    principal: Caller,
    owner: OwnerQuery = None,
) -> Response:
    """One of the caller's runs as it stands: the same answer as the run's own (an admin
    reads anyone's by naming its owner, as for tasks)."""
    runs = runtime_of(request).orchestrator
    return json_response(await runs.get(acting_for(principal, owner, "runs"), run_id))


@router.post("/{run_id}/cancel", status_code=202)
async def cancel_run(
    run_id: Annotated[str, Path(pattern=RUN_ID_PATTERN)],
    request: Request,
    principal: Caller,
    owner: OwnerQuery = None,
) -> Response:
    """Cancel one of the caller's runs (an admin cancels anyone's by naming its owner):
    no step starts once this has answered; steps in flight finish and keep their
    outcome, and the run ends `cancelled`. 202 with the run as it stands and `poll`;
    409 `run_ended` when it has already ended."""
    runs = runtime_of(request).orchestrator
    answer = await runs.cancel(acting_for(principal, owner, "runs"), run_id)
    return Response(answer.body, status_code=answer.status, media_type=JSON)


@router.post(
    "",
    status_code=201,
    openapi_extra={
        "requestBody": {
            "content": {
                JSON: {"schema": WorkflowDefinition.model_json_schema()},
                "application/yaml": {"schema": {"type": "string"}},
            }
        }
    },
)
async def save_workflow(
    request: Request,
    principal: Caller,
    content_type: Annotated[str, Header()] = JSON,
) -> Response:
    """Save a workflow (JSON, or YAML with `Content-Type: application/yaml`) by its name."""
    definition = parse_definition(await request.body(), content_type)
    saved = await runtime_of(request).orchestrator.save(principal, definition)
    return json_response(saved, 201)


@router.post("/{name}/run")
async def run_named(
    name: Annotated[str, Path(pattern=NAME_PATTERN)],
    request: Request,
    principal: Caller,
    body: Annotated[NamedRunRequest, Body()] = NamedRunRequest(),  # noqa: B008
    traceparent: TraceHeader = None,
    hop: HopHeader = None,
) -> Response:
    """Run a saved workflow with `{"input": {...}}` (its declared inputs must be there)."""
    trace = continue_trace(traceparent)
    answer = await runtime_of(request).orchestrator.run_named(
        principal, name, body, trace, hop_budget=hop
    )
    return _response(answer, trace.trace_id)


def parse_definition(raw: bytes, content_type: str) -> WorkflowDefinition:
    """A definition from a JSON or YAML body; 400 when it is neither, 422 off the schema."""
    try:
        document = yaml.safe_load(raw) if "yaml" in content_type.lower() else orjson.loads(raw)
    except (yaml.YAMLError, orjson.JSONDecodeError, UnicodeDecodeError):
        raise InvalidRequest("the body is not valid JSON or YAML", code="invalid_json") from None
    if isinstance(document, dict) and isinstance(document.get("workflow"), dict):
        document = document["workflow"]  # the `workflow: {...}` file form
    try:
        return WorkflowDefinition.model_validate(document)
    except ValidationError as exc:
        raise invalid_body(exc.errors()) from None


def _response(answer: Answer, trace_id: str) -> Response:
    return Response(
        answer.body, status_code=answer.status, media_type=JSON, headers={"x-trace-id": trace_id}
    )
