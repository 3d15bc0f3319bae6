"""The live capabilities a caller may invoke, as the faces list them (skills, tools)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_reach.invoke.schemas import spec_schema
from agent_reach.model.keys import Principal
from agent_reach.routing.catalog import build_catalog
from agent_reach.security.access import decide_access
from agent_reach.server.runtime import Runtime


@dataclass(frozen=True, slots=True)
class LiveCapability:
    tag: str
    description: str
    examples: list[str]
    input_schema: dict[str, Any] | None


def live_capabilities(runtime: Runtime, principal: Principal) -> list[LiveCapability]:
    """Capabilities with a live instance now that `principal` may invoke, sorted by tag."""
    live = {tag for tag, ids in runtime.registry.capabilities().items() if ids}
    cards = build_catalog(runtime.registry.index)
    rules = runtime.security.policy().access.invoke
    out = []
    for tag in sorted(live):
        # the access decision itself: listing is not an attempt, so nothing is logged as denied
        if not decide_access(rules, principal, tag, "invoke").allowed:
            continue
        card = cards.get(tag)
        schema = next(
            (
                s
                for i in runtime.registry.index.instances_of(tag)
                if (s := spec_schema(i.spec, tag)) is not None
            ),
            None,
        )
        out.append(
            LiveCapability(
                tag=tag,
                description=" ".join(card.descriptions) if card else "",
                examples=list(card.examples[:10]) if card else [],
                input_schema=schema,
            )
        )
    return out
