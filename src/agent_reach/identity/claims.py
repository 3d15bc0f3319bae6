"""A verified token's claims as a principal: name, role, grants and domain.

The claims named by `AR_OIDC_*_CLAIM` say who and what (`sub`, `reach_role`,
`reach_capabilities`, `reach_domain` by default); the policy's `[[identity.mappings]]`
add what the IdP's groups or scopes stand for, and `[[identity.issuers]]` bound the
roles an issuer's tokens may hold — a token of an issuer mapped to `caller` only that
claims `admin` is refused, never trusted.

The defaults are the safe ones: an issuer no rule names may not stand for `admin`, and
its principals are namespaced (`<issuer host>:<sub>`), so no token takes the name of a
key's principal unless a rule says so (`principal_prefix = ""`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

from pydantic import TypeAdapter, ValidationError

from agent_reach.errors import Forbidden, Unauthorized
from agent_reach.model.access import CapabilityPattern
from agent_reach.model.identity import ClaimMapping, IdentityPolicy, IssuerRule
from agent_reach.model.keys import ROLES, Principal, Role

# A principal name keys stored records (`<name>/<request id>`): no `/`, no spaces.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@|+-]{0,127}$")
_PATTERNS: TypeAdapter[list[str]] = TypeAdapter(list[CapabilityPattern])
_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9._:@|+-]+")
# What an issuer's tokens may be when no [[identity.issuers]] rule names it: never admin.
ROLES_WITHOUT_RULE: tuple[Role, ...] = tuple(r for r in ROLES if r != "admin")
TOKEN_KEY_ID = "token"  # noqa: S105 -- the `key_id` of every token principal: no key record stands behind it


@dataclass(frozen=True, slots=True)
class ClaimNames:
    """Which claims carry the principal, its role, its grants and its domain."""

    principal: str = "sub"
    role: str = "reach_role"
    grants: str = "reach_capabilities"
    domain: str = "reach_domain"


def principal_of_claims(
    claims: Mapping[str, Any], issuer: str, names: ClaimNames, policy: IdentityPolicy
) -> Principal:
    """The principal the verified `claims` of `issuer` stand for; 401 `token_malformed`
    for claims that cannot name one, 403 `role_not_allowed` for a role the policy does
    not let this issuer's tokens hold."""
    rule = policy.issuer_rule(issuer)
    name = claims.get(names.principal)
    if isinstance(name, str) and name:
        name = principal_prefix(issuer, rule) + name
    if not isinstance(name, str) or not _NAME.match(name):
        raise Unauthorized(
            f"the token's {names.principal!r} claim is not a usable principal name "
            "(1-128 letters, digits and . _ : @ | + -, with its issuer's prefix; an "
            "[[identity.issuers]] rule's principal_prefix sets a shorter one)",
            code="token_malformed",
        )
    mappings = [m for m in policy.mappings if _applies(m, claims, issuer, policy)]
    role = _role(claims, names, mappings, issuer, policy)
    grants = [*_grants(claims.get(names.grants), names.grants)]
    for mapping in mappings:
        grants.extend(c for c in mapping.capabilities if c not in grants)
    domain = claims.get(names.domain)
    if domain is not None and (not isinstance(domain, str) or not _NAME.match(domain)):
        raise Unauthorized(
            f"the token's {names.domain!r} claim is not a usable domain name",
            code="token_malformed",
        )
    if domain is None:
        domain = next((m.domain for m in mappings if m.domain is not None), None)
    return Principal(TOKEN_KEY_ID, name, domain, role, tuple(grants))


def principal_prefix(issuer: str, rule: IssuerRule | None) -> str:
    """What goes before the principal claim: the rule's `principal_prefix`, else the
    issuer's namespace, `<host[:port][.path]>:`."""
    if rule is not None and rule.principal_prefix is not None:
        return rule.principal_prefix
    return issuer_namespace(issuer) + ":"


def issuer_namespace(issuer: str) -> str:
    """`https://kc.shop.internal/realms/shop` -> `kc.shop.internal.realms.shop`: its
    host and path, in the characters a principal name may hold."""
    parts = urlsplit(issuer)
    where = (parts.netloc + parts.path) if parts.netloc else issuer
    return _NOT_IN_NAMES.sub(".", where.lower()).strip(".") or "issuer"


def _role(
    claims: Mapping[str, Any],
    names: ClaimNames,
    mappings: list[ClaimMapping],
    issuer: str,
    policy: IdentityPolicy,
) -> Role:
    rule = policy.issuer_rule(issuer)
    claimed = claims.get(names.role)
    if claimed is not None and claimed not in ROLES:
        raise Forbidden(
            f"the token's {names.role!r} claim {claimed!r} is not a role ({', '.join(ROLES)})",
            code="role_not_allowed",
        )
    role = cast(Role | None, claimed) or next((m.role for m in mappings if m.role), None)
    if role is None and rule is not None:
        role = rule.default_role
    if role is None:
        raise Forbidden(
            f"the token has no {names.role!r} claim and no identity mapping of the policy "
            "gives it a role",
            code="role_not_allowed",
        )
    if rule is not None and role not in rule.roles:
        raise Forbidden(
            f"the policy lets tokens of {issuer!r} be {', '.join(rule.roles)} only, not {role}",
            code="role_not_allowed",
        )
    if rule is None and role not in ROLES_WITHOUT_RULE:
        raise Forbidden(
            f"tokens of {issuer!r} may not be admin: no [[identity.issuers]] rule names the "
            "issuer (a rule whose roles include admin allows it)",
            code="role_not_allowed",
        )
    return role


def _applies(
    mapping: ClaimMapping, claims: Mapping[str, Any], issuer: str, policy: IdentityPolicy
) -> bool:
    if mapping.issuer not in ("*", issuer):
        return False
    if mapping.scope is not None:
        scope = claims.get("scope")
        held = scope.split() if isinstance(scope, str) else scope
        return isinstance(held, list) and mapping.scope in held
    rule = policy.issuer_rule(issuer)
    groups = claims.get(rule.groups_claim if rule is not None else "groups")
    return isinstance(groups, list) and mapping.group in groups


def _grants(value: object, claim: str) -> list[str]:
    """The capability patterns of the grants claim: a list, or a space separated string."""
    if value is None:
        return []
    patterns = value.split() if isinstance(value, str) else value
    try:
        return _PATTERNS.validate_python(patterns)
    except ValidationError:
        raise Unauthorized(
            f"the token's {claim!r} claim must be a list of capability patterns "
            "(`order.track`, `order.*`, `*`)",
            code="token_malformed",
        ) from None
