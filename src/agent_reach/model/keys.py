"""API key records and the principals they stand for (never the key itself)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["admin", "caller", "agent"]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: a named principal in a domain with a role."""

    key_id: str
    name: str
    domain: str
    role: Role


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """What is stored for a key: its id, the SHA-256 digest of its secret, and its owner."""

    key_id: str
    digest: str
    principal: str
    domain: str
    role: Role
    created_at: float
    revoked: bool = False

    def principal_of(self) -> Principal:
        return Principal(self.key_id, self.principal, self.domain, self.role)


# Who calls when security is off (`AR_AUTH=off`): one anonymous admin.
ANONYMOUS = Principal("anonymous", "anonymous", "default", "admin")


def owned_key(principal: Principal, request_id: str) -> str:
    """Where a caller's request id is kept: under its principal, so one caller can
    neither replay nor poll another's requests by guessing or reusing an id."""
    return request_id if principal == ANONYMOUS else f"{principal.name}/{request_id}"
