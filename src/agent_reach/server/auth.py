"""FastAPI dependencies: who is calling (every route but /healthz and the static UI)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Query, Request

from agent_reach.errors import InvalidRequest
from agent_reach.identity.certificates import peer_of
from agent_reach.model.keys import Principal
from agent_reach.security.ownership import require_observer
from agent_reach.server.runtime import runtime_of


async def authenticated(
    request: Request, authorization: Annotated[str | None, Header()] = None
) -> Principal:
    """The caller's principal, or 401 `unauthorized` (the same answer for every bad key);
    400 `duplicate_authorization` for two Authorization headers, as on `/v1/invoke`.
    Without Authorization, a verified client certificate the policy maps is the credential."""
    check_one_authorization(request)
    peer = peer_of(request.scope)
    return await runtime_of(request).security.authenticate(authorization, peer)


def check_one_authorization(request: Request) -> None:
    """400 `duplicate_authorization` unless the request has at most one such header."""
    if len(request.headers.getlist("authorization")) > 1:
        raise InvalidRequest("send one Authorization header", code="duplicate_authorization")


async def admin(
    principal: Annotated[Principal, Depends(authenticated)], request: Request
) -> Principal:
    """An admin principal, or 403 `forbidden`."""
    runtime_of(request).security.require_admin(principal)
    return principal


async def observer(principal: Annotated[Principal, Depends(authenticated)]) -> Principal:
    """An observer or admin principal (who may read every observability record), or 403."""
    require_observer(principal)
    return principal


Caller = Annotated[Principal, Depends(authenticated)]
Admin = Annotated[Principal, Depends(admin)]
Observer = Annotated[Principal, Depends(observer)]
OwnerQuery = Annotated[
    str | None,
    Query(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$",
        description="admins only: the principal whose record this is",
    ),
]
