"""API key records and the principals they stand for (never the key itself), and the
delegation chain a principal may act through."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

Role = Literal["admin", "observer", "caller", "agent"]
ROLES: tuple[Role, ...] = ("caller", "agent", "observer", "admin")


def known_role(value: object) -> object:
    """A policy's role names must be roles: the refusal names the one that is not."""
    if isinstance(value, str) and value not in ROLES:
        raise ValueError(f"{value!r} is not a role ({', '.join(ROLES)})")
    return value


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: a named principal, its domain (if any), its role and its key's grants.

    `capabilities` are the patterns its key was minted with: what an agent key may
    register, what a caller key may invoke and route to. `chain`, for a call made with
    a delegation token: the agents it came through (the principal is the original caller).
    """

    key_id: str
    name: str
    domain: str | None
    role: Role
    capabilities: tuple[str, ...] = ()
    chain: Chain | None = None  # a delegated call: on this principal's behalf, through agents

    def on_its_own(self) -> Principal:
        """The principal without the chain it acts through (the original caller)."""
        return self if self.chain is None else replace(self, chain=None)


@dataclass(frozen=True, slots=True)
class Link:
    """One agent of a delegation chain: its principal, the instance and the capability
    it was delivered."""

    principal: str
    domain: str | None
    role: Role
    instance: str
    capability: str


@dataclass(frozen=True, slots=True)
class Chain:
    """A delegation: on whose behalf (`caller`), through whom (`links`, oldest first; the
    last is the agent holding it), within what (scope, context, hops, budget, expiry).

    `root` is the first request's id: the chain's budget is kept under it.
    """

    caller: Principal
    links: tuple[Link, ...]
    root: str
    scope: tuple[str, ...]
    context_id: str | None
    hop: int
    budget: float | None
    expires_at: float  # wall clock

    @property
    def holder(self) -> Link:
        return self.links[-1]

    @property
    def depth(self) -> int:
        return len(self.links)


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """What is stored for a key: its id, the SHA-256 digest of its secret, its owner and
    the capability patterns it grants."""

    key_id: str
    digest: str
    principal: str
    domain: str | None
    role: Role
    created_at: float
    revoked: bool = False
    capabilities: tuple[str, ...] = ()

    def principal_of(self) -> Principal:
        return Principal(self.key_id, self.principal, self.domain, self.role, self.capabilities)


# Who calls when security is off (`AR_AUTH=off`): one anonymous admin.
ANONYMOUS = Principal("anonymous", "anonymous", "default", "admin")


def owned_key(principal: Principal, request_id: str) -> str:
    """Where a caller's request id is kept: under its principal, so one caller can
    neither replay nor poll another's requests by guessing or reusing an id (a delegated
    call's, under its original caller's, with or without security)."""
    return request_id if principal.on_its_own() == ANONYMOUS else f"{principal.name}/{request_id}"
