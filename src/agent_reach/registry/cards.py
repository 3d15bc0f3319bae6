"""An instance's card: the text the router matches it by, as `GET /v1/agents/{id}/card`
shows it to a key that may see only some of the instance's capabilities."""

from __future__ import annotations

from agent_reach.model.agents import AgentCard, AgentSpec, SkillCard

SKILL_SEMANTICS = ("safe", "idempotent")  # declared per skill, shown when a skill declares them


def card_of(spec: AgentSpec, visible: list[str]) -> AgentCard:
    """The instance's routing text, only of the `visible` capabilities; the agent-wide
    description and examples only when every capability is visible (they may speak of
    the others)."""
    skills = [
        SkillCard(
            capability=skill.capability,
            description=skill.description,
            examples=skill.examples,
            **{
                name: value
                for name in SKILL_SEMANTICS
                if (value := getattr(skill, name, None)) is not None
            },
        )
        for skill in spec.skills
        if skill.capability in visible
    ]
    complete = set(spec.capabilities) <= set(visible)
    return AgentCard(
        id=spec.id,
        description=spec.description if complete else "",
        examples=spec.examples if complete else [],
        skills=skills,
        complete=complete,
    )
