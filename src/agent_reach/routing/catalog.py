"""The capability catalog: what text matchers learn from, built from the registry index."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_reach.registry.index import RegistryIndex


@dataclass(frozen=True, slots=True)
class CapabilityCard:
    """Everything registered about one capability: its tag, descriptions and examples.

    An instance's `skills` entry for the capability is used when it has one; otherwise
    the instance's own `description` and `examples` count for each of its capabilities.
    Generic (catch-all) instances are not in the catalog: they are the fallback.
    `learned` are the examples that came from feedback (corrections), not registration.
    """

    capability: str
    descriptions: tuple[str, ...]
    examples: tuple[str, ...]
    input_schema: Mapping[str, Any] | None = None
    learned: tuple[str, ...] = ()


def build_catalog(
    index: RegistryIndex, learned: Mapping[str, Sequence[str]] | None = None
) -> dict[str, CapabilityCard]:
    """One card per capability offered by at least one non-generic instance; `learned`
    examples (from feedback) join the registered ones of their capability."""
    descriptions: dict[str, dict[str, None]] = {}
    examples: dict[str, dict[str, None]] = {}
    schemas: dict[str, Mapping[str, Any]] = {}
    for instance in index.by_id.values():
        spec = instance.spec
        if spec.generic:
            continue
        skills = {skill.capability: skill for skill in spec.skills}
        for tag in spec.capabilities:
            skill = skills.get(tag)
            text = skill.description if skill else spec.description
            said = skill.examples if skill else spec.examples
            schema = skill.input_schema if skill and skill.input_schema else spec.input_schema
            if schema is not None:
                schemas.setdefault(tag, schema)
            if text:
                descriptions.setdefault(tag, {})[text] = None
            examples.setdefault(tag, {}).update(dict.fromkeys(said))
            descriptions.setdefault(tag, {})
    taught: dict[str, tuple[str, ...]] = {}
    for tag, texts in (learned or {}).items():
        if tag in descriptions:
            registered = examples.setdefault(tag, {})
            taught[tag] = tuple(t for t in dict.fromkeys(texts) if t not in registered)
            registered.update(dict.fromkeys(texts))
    return {
        tag: CapabilityCard(
            tag, tuple(texts), tuple(examples.get(tag, {})), schemas.get(tag), taught.get(tag, ())
        )
        for tag, texts in sorted(descriptions.items())
    }
