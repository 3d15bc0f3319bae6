"""Access decisions: does a principal's rule cover a capability? Deny when none does."""

from __future__ import annotations

from dataclasses import dataclass

from agent_reach.model.access import AccessRule
from agent_reach.model.keys import Principal


@dataclass(frozen=True, slots=True)
class AccessDecision:
    """The verdict and the rule that allowed it (None: denied by default, or admin)."""

    allowed: bool
    reason: str
    rule: AccessRule | None = None


def principal_matches(pattern: str, principal: Principal) -> bool:
    if pattern == "*":
        return True
    kind, _, value = pattern.partition(":")
    actual = {"name": principal.name, "domain": principal.domain, "role": principal.role}[kind]
    return actual.lower() == value


def capability_matches(pattern: str, capability: str) -> bool:
    """`*` is everything, `inventory.*` every tag under `inventory.`, else the exact tag."""
    if pattern == "*":
        return True
    if pattern.endswith(".*"):
        return capability.startswith(pattern[:-1])
    return capability == pattern


def decide_access(rules: list[AccessRule], principal: Principal, capability: str) -> AccessDecision:
    """Admins may do anything; anyone else needs a rule naming them and the capability."""
    if principal.role == "admin":
        return AccessDecision(True, "admin role")
    for rule in rules:
        if any(principal_matches(p, principal) for p in rule.principals) and any(
            capability_matches(c, capability) for c in rule.capabilities
        ):
            return AccessDecision(True, "allowed by rule", rule)
    return AccessDecision(False, "no rule allows it (deny by default)")
