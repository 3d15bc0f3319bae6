"""The policy at run time: read it (observer), replace it and read its audit (admin)."""

from __future__ import annotations

import dataclasses
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from starlette.responses import Response

from agent_reach.policy.policy import Policy
from agent_reach.server.auth import Admin, Observer
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(prefix="/v1/policy", tags=["policy"])


@router.get("")
async def show_policy(request: Request, _: Observer) -> Response:
    """The policy in force: version (also the `ETag`), revision, source, the policy itself
    (observers and admins: it names every principal's rules and quotas), and which text
    matchers are ready (the sentence encoder loads in the background), and the trusted
    token issuers as this coordinator holds them (`identity`: rule, prefix, keys, the last
    fetch failure)."""
    runtime = runtime_of(request)
    status = runtime.policy.status()
    body = {field.name: getattr(status, field.name) for field in dataclasses.fields(status)}
    body["matching"] = runtime.routing.matching.status(status.policy)
    body["identity"] = runtime.security.identity_status()
    return json_response(body, headers={"etag": f'"{status.version}"'})


@router.put("")
async def replace_policy(
    body: Policy,
    request: Request,
    principal: Admin,
    if_match: Annotated[
        str | None, Header(description="the version the change was made on; 409 when stale")
    ] = None,
) -> Response:
    """Replace the policy on every coordinator (the policy file's schema, as JSON).

    An invalid body is 422 with its `problems` and changes nothing; with `If-Match`,
    409 `version_conflict` unless that version is still in force.
    """
    source = runtime_of(request).policy
    change = await source.replace(body, by=principal.name, if_match=_version(if_match))
    status = source.status()
    return json_response(
        {"change": change, "status": status}, headers={"etag": f'"{status.version}"'}
    )


@router.get("/changes")
async def policy_changes(
    request: Request, _: Admin, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> Response:
    """The audit log, newest first: revision, when, who, source, version before and after."""
    return json_response({"changes": await runtime_of(request).policy.changes(limit)})


def _version(if_match: str | None) -> str | None:
    """The version an `If-Match` names: `abc123`, `"abc123"` or `W/"abc123"`; `*` is any."""
    if if_match is None or if_match.strip() == "*":
        return None
    return if_match.strip().removeprefix("W/").strip('"')
