"""API keys (admin only): create one (shown once), list them (never the secret), revoke."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from agent_reach.errors import NotFound
from agent_reach.model.keys import Role
from agent_reach.security.keys import mint_key
from agent_reach.server.auth import Admin
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(prefix="/v1/keys", tags=["security"])


class KeyRequest(BaseModel):
    """`POST /v1/keys`: who the key is for."""

    model_config = ConfigDict(extra="forbid")

    principal: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")]
    domain: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")]
    role: Role = "caller"


@router.post("", status_code=201)
async def create_key(body: KeyRequest, request: Request, _: Admin) -> Response:
    """Mint a key; the answer is the only place the key ever appears."""
    runtime = runtime_of(request)
    key, record = mint_key(
        body.principal.lower(), body.domain.lower(), body.role, runtime.clock.wall()
    )
    await runtime.backends.keys.put(record)
    return json_response(
        {
            "key": key,
            "key_id": record.key_id,
            "principal": record.principal,
            "domain": record.domain,
            "role": record.role,
        },
        201,
    )


@router.get("")
async def list_keys(request: Request, _: Admin) -> Response:
    """Key ids with their principals; secrets and digests are never shown."""
    records = await runtime_of(request).backends.keys.list()
    return json_response(
        {
            "keys": [
                {
                    "key_id": r.key_id,
                    "principal": r.principal,
                    "domain": r.domain,
                    "role": r.role,
                    "created_at": r.created_at,
                    "revoked": r.revoked,
                }
                for r in sorted(records, key=lambda r: r.created_at)
            ]
        }
    )


@router.delete("/{key_id}", status_code=204)
async def revoke_key(
    key_id: Annotated[str, Path(pattern=r"^[0-9a-f]{16}$")], request: Request, _: Admin
) -> Response:
    """Revoke at once; every coordinator refuses the key within a second."""
    runtime = runtime_of(request)
    if not await runtime.backends.keys.revoke(key_id):
        raise NotFound(f"no key {key_id!r}", code="unknown_key")
    runtime.security.forget(key_id)
    return Response(status_code=204)
