"""Contexts: create, read (whole or projected), merge-patch or append, delete.

Two ways in, kept apart. An agent presents the token of its delivery (``Authorization:
Bearer ctx1...`` or ``X-Reach-Context-Token``) to read and write: it opens one context,
and only the fields it names, with no API key. Everyone else is on the caller path,
`principal_grant`, which needs an API key (when keys are on) and opens only the contexts
its principal created or was shared (`share_with`), whole; an admin's opens every one.
Any other context answers the same 404 as a missing one. Creating and deleting are only
on the caller path; observers, who only read observability data, may not create.
"""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Header, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.datastructures import Headers
from starlette.responses import Response

from agent_reach.config import MAX_CONTEXT_TTL_S
from agent_reach.context.documents import CONTEXT_ID_PATTERN, ContextView
from agent_reach.context.ownership import MAX_SHARES, ShareEntry, created_by
from agent_reach.context.projection import parse_fields
from agent_reach.context.tokens import TOKEN_PREFIX, Grant, caller_grant
from agent_reach.errors import InvalidRequest, ValidationFailed
from agent_reach.security.ownership import require_not_observer
from agent_reach.server.auth import Caller, authenticated
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(prefix="/v1/contexts", tags=["contexts"])
ContextIdPath = Annotated[str, Path(pattern=CONTEXT_ID_PATTERN)]
MERGE_PATCH = "application/merge-patch+json"  # RFC 7386, section 4
TOKEN_HEADER = "x-reach-context-token"  # noqa: S105 - a header name
MAX_FIELDS_QUERY_CHARS = 16_384  # 64 paths of 256 characters each


class CreateContext(BaseModel):
    """`POST /v1/contexts`: the initial document, the context's ttl, and who else may use
    it (principal names or ``domain:<domain>``), all optional."""

    model_config = ConfigDict(extra="forbid")

    document: dict[str, Any] = {}
    ttl_s: float | None = Field(None, gt=0, le=MAX_CONTEXT_TTL_S)
    share_with: list[ShareEntry] = Field(default_factory=list, max_length=MAX_SHARES)


class AppendItems(BaseModel):
    """Items to add at the end of a named list (conversation turns, events...)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(alias="list", min_length=1, max_length=64)
    items: list[Any] = Field(min_length=1)


class ContextPatch(BaseModel):
    """`PATCH` as JSON: ``{"merge": {...}}`` (a merge patch) or ``{"append": {...}}``."""

    model_config = ConfigDict(extra="forbid")

    merge: dict[str, Any] | None = None
    append: AppendItems | None = None

    @model_validator(mode="after")
    def _one_change(self) -> ContextPatch:
        if (self.merge is None) == (self.append is None):
            raise ValueError("give exactly one of `merge` and `append`")
        return self


async def principal_grant(request: Request) -> Grant:
    """The caller path: the contexts the key's principal may use; 401 `unauthorized`
    without a valid key."""
    return caller_grant(await authenticated(request, request.headers.get("authorization")))


async def context_grant(request: Request) -> Grant:
    """What a context token opens; without a token, the caller path."""
    token = presented_token(request.headers)
    if token is None:
        return await principal_grant(request)
    return runtime_of(request).contexts.signer.verify(token)


def presented_token(headers: Headers) -> str | None:
    """The context token in `X-Reach-Context-Token`, or in a Bearer `Authorization`."""
    token = headers.get(TOKEN_HEADER)
    if token:
        return token.strip()
    scheme, _, value = headers.get("authorization", "").partition(" ")
    value = value.strip()
    if scheme.lower() == "bearer" and value.startswith(TOKEN_PREFIX):
        return value
    return None  # no token, or another credential (an API key) for the caller path


@router.post("", status_code=201)
async def create_context(
    request: Request, principal: Caller, body: CreateContext | None = None
) -> Response:
    """Create a context owned by the caller; answers its id, version 1 and its life in s."""
    require_not_observer(principal, "create contexts")
    body = body or CreateContext()
    access = created_by(principal, body.share_with)
    view = await runtime_of(request).contexts.create(body.document, body.ttl_s, access)
    return _answer(view, 201, location=f"/v1/contexts/{view.context_id}")


@router.get("/{context_id}")
async def read_context(
    context_id: ContextIdPath,
    request: Request,
    grant: Annotated[Grant, Depends(context_grant)],
    fields: Annotated[str | None, Query(max_length=MAX_FIELDS_QUERY_CHARS)] = None,
) -> Response:
    """The document, or only `fields` (``product,user.intent``); a token narrows it further."""
    contexts = runtime_of(request).contexts
    wanted = None if fields is None else parse_fields(fields)
    return _answer(await contexts.read(context_id, grant, wanted))


@router.patch("/{context_id}")
async def patch_context(
    context_id: ContextIdPath,
    request: Request,
    grant: Annotated[Grant, Depends(context_grant)],
    if_match: Annotated[str | None, Header()] = None,
) -> Response:
    """Merge patch or append; with ``If-Match: <version>``, 409 unless still at it."""
    contexts = runtime_of(request).contexts
    if_version = _version(if_match)
    raw = await request.body()
    if request.headers.get("content-type", "").split(";")[0].strip() == MERGE_PATCH:
        view = await contexts.merge(context_id, grant, _merge_patch(raw), if_version=if_version)
    else:
        change = ContextPatch.model_validate_json(raw)
        if change.append is not None:
            view = await contexts.append(
                context_id, grant, change.append.name, change.append.items, if_version=if_version
            )
        else:  # the model holds exactly one of the two
            view = await contexts.merge(
                context_id, grant, change.merge or {}, if_version=if_version
            )
    return _answer(view)


@router.delete("/{context_id}", status_code=204)
async def delete_context(
    context_id: ContextIdPath,
    request: Request,
    grant: Annotated[Grant, Depends(principal_grant)],
) -> Response:
    """Delete the context and every list of it."""
    await runtime_of(request).contexts.delete(context_id, grant)
    return Response(status_code=204)


def _merge_patch(raw: bytes) -> dict[str, Any]:
    """An ``application/merge-patch+json`` body, which must be an object for a context."""
    try:
        patch = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise InvalidRequest("the body is not valid JSON", code="invalid_json") from None
    if not isinstance(patch, dict):
        raise ValidationFailed(
            "a context is a JSON object, so its merge patch must be one too", code="invalid_patch"
        )
    return patch


def _version(if_match: str | None) -> int | None:
    """The version an ``If-Match`` asks for: ``3``, ``"3"`` or ``W/"3"``; ``*`` is any."""
    if if_match is None or if_match.strip() == "*":
        return None
    value = if_match.strip().removeprefix("W/").strip('"')
    if not value.isdigit() or len(value) > 18:
        raise InvalidRequest(
            "If-Match must hold a context version, such as 3", code="invalid_if_match"
        )
    return int(value)


def _answer(view: ContextView, status: int = 200, *, location: str | None = None) -> Response:
    body: dict[str, Any] = {
        "context_id": view.context_id,
        "version": view.version,
        "expires_in_s": round(view.expires_in_s, 3),
    }
    if view.document is not None:
        body["document"] = view.document
    headers = {"etag": f'"{view.version}"'}
    if location is not None:
        headers["location"] = location
    return json_response(body, status, headers)
