"""The capability catalog: what text matchers learn from, built from the registry index."""

from __future__ import annotations

from dataclasses import dataclass

from agent_reach.registry.index import RegistryIndex


@dataclass(frozen=True, slots=True)
class CapabilityCard:
    """Everything registered about one capability: its tag, descriptions and examples.

    An instance's `skills` entry for the capability is used when it has one; otherwise
    the instance's own `description` and `examples` count for each of its capabilities.
    Generic (catch-all) instances are not in the catalog: they are the fallback.
    """

    capability: str
    descriptions: tuple[str, ...]
    examples: tuple[str, ...]


def build_catalog(index: RegistryIndex) -> dict[str, CapabilityCard]:
    """One card per capability offered by at least one non-generic instance."""
    descriptions: dict[str, dict[str, None]] = {}
    examples: dict[str, dict[str, None]] = {}
    for instance in index.by_id.values():
        spec = instance.spec
        if spec.generic:
            continue
        skills = {skill.capability: skill for skill in spec.skills}
        for tag in spec.capabilities:
            skill = skills.get(tag)
            text = skill.description if skill else spec.description
            said = skill.examples if skill else spec.examples
            if text:
                descriptions.setdefault(tag, {})[text] = None
            examples.setdefault(tag, {}).update(dict.fromkeys(said))
            descriptions.setdefault(tag, {})
    return {
        tag: CapabilityCard(tag, tuple(texts), tuple(examples.get(tag, {})))
        for tag, texts in sorted(descriptions.items())
    }
