"""Access decisions: does the key's own grant, or a policy rule, cover a capability?

Deny when neither does. A key carries its grants (`capabilities` patterns given when
it was minted): an agent key's grants are what it may register, a caller key's what
it may invoke and route to. The policy file's `access` rules apply on top: a rule may
allow what a key's grants do not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NoReturn

import structlog

from agent_reach.errors import Forbidden
from agent_reach.model.access import AccessRule
from agent_reach.model.keys import Principal, Role

log = structlog.get_logger("agent_reach.security")

Action = Literal["invoke", "register"]
# What the capabilities a key carries let its holder do, by role (issue 12): admins need
# no grant, observers only read.
KEY_GRANTS: dict[Role, Action] = {"caller": "invoke", "agent": "register"}


@dataclass(frozen=True, slots=True)
class AccessDecision:
    """The verdict and what decided it: the key's grant, a policy rule, the admin role,
    or nothing (denied by default)."""

    allowed: bool
    reason: str
    rule: AccessRule | None = None
    grant: str | None = None


def deny(
    decision: AccessDecision, principal: Principal, capability: str, action: Action
) -> NoReturn:
    """403 naming who may not do what, and the decision's reason (logged)."""
    log.info("access_denied", principal=principal.name, action=action, capability=capability)
    raise Forbidden(f"{principal.name!r} may not {action} {capability!r}: {decision.reason}")


def principal_matches(pattern: str, principal: Principal) -> bool:
    if pattern == "*":
        return True
    kind, _, value = pattern.partition(":")
    actual = {"name": principal.name, "domain": principal.domain, "role": principal.role}[kind]
    return actual is not None and actual.lower() == value


def capability_matches(pattern: str, capability: str) -> bool:
    """`*` is everything, `inventory.*` every tag under `inventory.`, else the exact tag."""
    if pattern == "*":
        return True
    if pattern.endswith(".*"):
        return capability.startswith(pattern[:-1])
    return capability == pattern


def key_grant(principal: Principal, capability: str, action: Action) -> str | None:
    """The pattern of the principal's own key that grants `action` on `capability`, if any."""
    if KEY_GRANTS.get(principal.role) != action:
        return None
    return next((p for p in principal.capabilities if capability_matches(p, capability)), None)


def decide_access(
    rules: list[AccessRule], principal: Principal, capability: str, action: Action
) -> AccessDecision:
    """Admins may do anything, observers nothing, callers never register; anyone else
    needs its key's grant or a rule naming them."""
    if principal.role == "admin":
        return AccessDecision(True, "admin role")
    if principal.role == "observer":
        return AccessDecision(False, "an observer key is read-only")
    if principal.role == "caller" and action == "register":
        return AccessDecision(False, "a caller key may not register agents")
    grant = key_grant(principal, capability, action)
    if grant is not None:
        return AccessDecision(True, f"granted by the key ({grant})", grant=grant)
    for rule in rules:
        if any(principal_matches(p, principal) for p in rule.principals) and any(
            capability_matches(c, capability) for c in rule.capabilities
        ):
            return AccessDecision(True, "allowed by a policy rule", rule)
    return AccessDecision(False, "no key grant or policy rule allows it (deny by default)")
