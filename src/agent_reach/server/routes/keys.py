"""API keys: create one (shown once), list them (never the secret), revoke — admins only;
`GET /v1/keys/self` tells any key's holder who it stands for.

A key may carry its grants (`capabilities`): the patterns an agent key may register,
or a caller key may invoke and route to, so a first secured setup needs no policy file.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from starlette.responses import Response

from agent_reach.errors import NotFound
from agent_reach.model.access import CapabilityPattern
from agent_reach.model.keys import KeyRecord, Role
from agent_reach.security.access import KEY_GRANTS
from agent_reach.security.keys import mint_key
from agent_reach.server.auth import Admin, Caller
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(prefix="/v1/keys", tags=["security"])
MAX_KEY_GRANTS = 64  # capability patterns one key carries; more belong in the policy file


class KeyRequest(BaseModel):
    """`POST /v1/keys`: who the key is for, and what it grants."""

    model_config = ConfigDict(extra="forbid")

    principal: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")]
    domain: Annotated[
        Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]{1,64}$")] | None,
        Field(description="optional: what the policy's `domain:` rules match"),
    ] = None
    role: Role = "caller"
    capabilities: Annotated[
        list[CapabilityPattern],
        Field(
            max_length=MAX_KEY_GRANTS,
            description="an agent key may register these, a caller key invoke and route to them",
        ),
    ] = []

    @model_validator(mode="after")
    def _grants_fit_the_role(self) -> KeyRequest:
        if self.capabilities and self.role not in KEY_GRANTS:
            raise ValueError(
                f"capabilities: an {self.role} key carries no capability grants (an admin may "
                "do everything, an observer only reads); give them to a caller or agent key"
            )
        return self


@router.post("", status_code=201)
async def create_key(body: KeyRequest, request: Request, _: Admin) -> Response:
    """Mint a key; the answer is the only place the key ever appears."""
    runtime = runtime_of(request)
    key, record = mint_key(
        body.principal.lower(),
        None if body.domain is None else body.domain.lower(),
        body.role,
        runtime.clock.wall(),
        tuple(dict.fromkeys(body.capabilities)),
    )
    await runtime.backends.keys.put(record)
    return json_response({"key": key, **_shown(record)}, 201)


@router.get("")
async def list_keys(request: Request, _: Admin) -> Response:
    """Key ids with their principals and grants; secrets and digests are never shown."""
    records = await runtime_of(request).backends.keys.list()
    return json_response(
        {
            "keys": [
                {**_shown(r), "created_at": r.created_at, "revoked": r.revoked}
                for r in sorted(records, key=lambda r: r.created_at)
            ]
        }
    )


@router.get("/self")
async def own_key(principal: Caller) -> Response:
    """Who the presented key stands for (any valid key): its principal, domain, role and
    grants. The dashboard asks this to tell an observer's key from a caller's."""
    return json_response(
        {
            "key_id": principal.key_id,
            "principal": principal.name,
            "domain": principal.domain,
            "role": principal.role,
            "capabilities": list(principal.capabilities),
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


def _shown(record: KeyRecord) -> dict[str, Any]:
    return {
        "key_id": record.key_id,
        "principal": record.principal,
        "domain": record.domain,
        "role": record.role,
        "capabilities": list(record.capabilities),
    }
