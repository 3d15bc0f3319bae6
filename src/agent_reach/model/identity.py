"""How outside identities become principals, as the policy file states them.

`[[identity.issuers]]` bounds what an IdP's tokens may claim (an issuer mapped to
`caller` only cannot mint an admin), `[[identity.mappings]]` turn IdP groups or scopes
into a role, grants and a domain, `[[identity.certificates]]` turn a client
certificate (its subject CN or a SAN, e.g. a SPIFFE URI) into a principal.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from agent_reach.model.access import CapabilityPattern
from agent_reach.model.keys import ROLES, Role, known_role

Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$")]
ClaimValue = Annotated[str, StringConstraints(min_length=1, max_length=256)]
PolicyRole = Annotated[Role, BeforeValidator(known_role)]  # a refusal names the non-role


class IssuerRule(BaseModel):
    """What the tokens of one issuer (or of every trusted issuer, `*`) may stand for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    issuer: Annotated[str, StringConstraints(min_length=1, max_length=512)] = "*"
    roles: Annotated[list[PolicyRole], Field(min_length=1)] = list(ROLES)
    default_role: PolicyRole | None = Field(
        None, description="the role of a token that claims none and matches no mapping"
    )
    groups_claim: Annotated[str, StringConstraints(min_length=1, max_length=128)] = "groups"
    principal_prefix: (
        Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._:@|+-]{0,32}$")] | None
    ) = Field(
        None,
        description="put before every principal name of this issuer (e.g. `kc:`), so "
        "no token can take the name of a key's principal; unset: the issuer's namespace "
        '(`<host>:`), `""`: the claim as it is',
    )

    @model_validator(mode="after")
    def _default_is_allowed(self) -> IssuerRule:
        if self.default_role is not None and self.default_role not in self.roles:
            raise ValueError(f"default_role {self.default_role!r} is not among roles {self.roles}")
        return self


class ClaimMapping(BaseModel):
    """A token in this group (or holding this scope) gets this role, grants and domain."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    issuer: Annotated[str, StringConstraints(min_length=1, max_length=512)] = "*"
    group: ClaimValue | None = None
    scope: ClaimValue | None = None
    role: PolicyRole | None = None
    capabilities: list[CapabilityPattern] = Field(default_factory=list)
    domain: Name | None = None

    @model_validator(mode="after")
    def _one_condition(self) -> ClaimMapping:
        if (self.group is None) == (self.scope is None):
            raise ValueError("a mapping names exactly one of group or scope")
        return self


class CertificateMapping(BaseModel):
    """A client certificate naming `match` (subject CN, a DNS, URI or email SAN; a
    trailing `*` matches a prefix) is this principal."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    match: Annotated[str, StringConstraints(min_length=1, max_length=512)]
    field: Literal["any", "cn", "dns", "uri", "email"] = "any"
    principal: Name
    role: PolicyRole
    domain: Name | None = None
    capabilities: list[CapabilityPattern] = Field(default_factory=list)


class IdentityPolicy(BaseModel):
    """The identity section of the policy: shared by every coordinator, changed at run time."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    issuers: list[IssuerRule] = Field(default_factory=list)
    mappings: list[ClaimMapping] = Field(default_factory=list)
    certificates: list[CertificateMapping] = Field(default_factory=list)

    def issuer_rule(self, issuer: str) -> IssuerRule | None:
        """The first rule naming `issuer` itself, else the first `*` rule, else None."""
        exact = next((r for r in self.issuers if r.issuer == issuer), None)
        return exact or next((r for r in self.issuers if r.issuer == "*"), None)
