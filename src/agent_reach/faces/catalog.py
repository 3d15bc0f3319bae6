"""The live capabilities a caller may invoke, as the faces list them (skills, tools).

`offers` is the one predicate: a capability is listed to a principal exactly when it
has a live instance and the security service's `may_invoke` (the verdict `/v1/invoke`
enforces) lets the principal invoke it, so a face's list and its refusals agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_reach.invoke.schemas import spec_schema
from agent_reach.model.keys import Principal
from agent_reach.routing.catalog import build_catalog
from agent_reach.server.runtime import Runtime


@dataclass(frozen=True, slots=True)
class LiveCapability:
    tag: str
    description: str
    examples: list[str]
    input_schema: dict[str, Any] | None


def offers(runtime: Runtime, principal: Principal, tag: str) -> bool:
    """Whether `tag` has a live instance now and `principal` may invoke it."""
    return is_live(runtime, tag) and runtime.security.may_invoke(principal, tag)


def is_live(runtime: Runtime, tag: str) -> bool:
    """Whether the capability has a live instance now (the registry's own rule)."""
    now = runtime.registry.clock.monotonic()
    return any(i.is_live(now) for i in runtime.registry.index.instances_of(tag))


def input_schema(runtime: Runtime, tag: str) -> dict[str, Any] | None:
    """The capability's declared payload schema (the first instance declaring one)."""
    return next(
        (
            s
            for i in runtime.registry.index.instances_of(tag)
            if (s := spec_schema(i.spec, tag)) is not None
        ),
        None,
    )


def live_capabilities(runtime: Runtime, principal: Principal) -> list[LiveCapability]:
    """Capabilities with a live instance now that `principal` may invoke, sorted by tag."""
    cards = build_catalog(runtime.registry.index)
    out = []
    for tag in sorted(runtime.registry.index.by_capability):
        # the access decision itself: listing is not an attempt, so nothing is logged as denied
        if not offers(runtime, principal, tag):
            continue
        card = cards.get(tag)
        out.append(
            LiveCapability(
                tag=tag,
                description=" ".join(card.descriptions) if card else "",
                examples=list(card.examples[:10]) if card else [],
                input_schema=input_schema(runtime, tag),
            )
        )
    return out
