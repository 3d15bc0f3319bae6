"""The live capabilities a caller may invoke, as the faces list them (skills, tools).

`Catalog.offers` is the one predicate: a capability is listed to a principal exactly when
it has a live instance and the access gate's `may_invoke` (the verdict `/v1/invoke`
enforces, a delegation chain's boundary included) lets the principal invoke it, so a
face's list and its refusals agree.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agent_reach.invoke.schemas import spec_schema
from agent_reach.model.keys import Principal
from agent_reach.registry.service import Registry
from agent_reach.routing.catalog import build_catalog
from agent_reach.routing.ranking import Allowed, RankedCapability

# (text, which capabilities may be ranked, how many) -> the best, best first
Rank = Callable[[str, Allowed, int], Awaitable[list[RankedCapability]]]


@dataclass(frozen=True, slots=True)
class LiveCapability:
    tag: str
    description: str
    examples: list[str]
    input_schema: dict[str, Any] | None


class Catalog:
    """What a coordinator offers whom: its registry read through the access verdict."""

    def __init__(
        self,
        registry: Registry,
        may_invoke: Callable[[Principal, str], bool],
        access: Callable[[], object],
        rank: Rank,
    ) -> None:
        self.registry = registry
        self.may_invoke = may_invoke
        self.access = access  # the access rules in force: what every caller's list depends on
        self.rank = rank

    def offers(self, principal: Principal, tag: str) -> bool:
        """Whether `tag` has a live instance now and `principal` may invoke it."""
        return self.is_live(tag) and self.may_invoke(principal, tag)

    def is_live(self, tag: str) -> bool:
        """Whether the capability has a live instance now (the registry's own rule)."""
        now = self.registry.clock.monotonic()
        return any(i.is_live(now) for i in self.registry.index.instances_of(tag))

    def tags(self) -> list[str]:
        """Every registered capability, live or not."""
        return list(self.registry.index.by_capability)

    def input_schema(self, tag: str) -> dict[str, Any] | None:
        """The capability's declared payload schema (the first instance declaring one)."""
        return next(
            (
                s
                for i in self.registry.index.instances_of(tag)
                if (s := spec_schema(i.spec, tag)) is not None
            ),
            None,
        )

    def live_capabilities(self, principal: Principal) -> list[LiveCapability]:
        """Capabilities with a live instance now that `principal` may invoke, by tag."""
        index = self.registry.index
        cards = build_catalog(index)
        out = []
        for tag in sorted(index.by_capability):
            # the access decision itself: listing is not an attempt, nothing is logged denied
            if not self.offers(principal, tag):
                continue
            card = cards.get(tag)
            out.append(
                LiveCapability(
                    tag=tag,
                    description=" ".join(card.descriptions) if card else "",
                    examples=list(card.examples[:10]) if card else [],
                    input_schema=self.input_schema(tag),
                )
            )
        return out

    def offered(self) -> tuple[frozenset[str], object]:
        """The live capabilities and the access rules: when either changes, what some
        caller is listed may have changed."""
        live = frozenset(t for t, ids in self.registry.capabilities().items() if ids)
        return live, self.access()
