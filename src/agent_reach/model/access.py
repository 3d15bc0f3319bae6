"""Access rules and quotas as the policy file states them (deny by default)."""

from __future__ import annotations

import unicodedata
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
)

from agent_reach.model.keys import known_role


def _fold(text: object) -> object:
    """One spelling for names and patterns: NFKC, trimmed, lower case."""
    return unicodedata.normalize("NFKC", text).strip().lower() if isinstance(text, str) else text


def _known_role(pattern: str) -> str:
    """`role:<role>` must name a role: a misspelt one would match no one, silently."""
    kind, _, role = pattern.partition(":")
    if kind == "role":
        known_role(role)
    return pattern


# "*", "name:<principal>", "domain:<domain>" or "role:<role>"
PrincipalPattern = Annotated[
    str,
    BeforeValidator(_fold),
    StringConstraints(pattern=r"^(\*|(name|domain|role):[a-z0-9._:-]{1,128})$"),
    AfterValidator(_known_role),
]
# "*", an exact capability, or a prefix ending in ".*" ("inventory.*")
CapabilityPattern = Annotated[
    str,
    BeforeValidator(_fold),
    StringConstraints(pattern=r"^(\*|[a-z0-9][a-z0-9_.-]{0,127}?(\.\*)?)$"),
]


class AccessRule(BaseModel):
    """These principals may act on capabilities matching these patterns."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    principals: Annotated[list[PrincipalPattern], Field(min_length=1)]
    capabilities: Annotated[list[CapabilityPattern], Field(min_length=1)]


class AccessPolicy(BaseModel):
    """Who may invoke (and route to) which capabilities, who may register which, and
    which agents may delegate which."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    invoke: list[AccessRule] = Field(default_factory=list)
    registration: list[AccessRule] = Field(default_factory=list, alias="register")
    # Which agents may hand which capabilities on, on behalf of their caller (docs/mesh.md).
    delegate: list[AccessRule] = Field(default_factory=list)


class QuotaRule(BaseModel):
    """A token bucket: `rate_per_s` refill, at most `burst` at once.

    `scope: pair` keeps one bucket per caller and capability; `scope: caller` one per
    caller across every capability the rule covers.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    principals: Annotated[list[PrincipalPattern], Field(min_length=1)]
    capabilities: Annotated[list[CapabilityPattern], Field(min_length=1)] = ["*"]
    rate_per_s: float = Field(gt=0, le=1_000_000)
    burst: int = Field(ge=1, le=10_000_000)
    scope: Literal["pair", "caller"] = "pair"
