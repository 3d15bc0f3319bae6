"""An MCP server's tools as capabilities: their names, their cards, the registration.

A tool `get_weather` of agent `weather-01` is the capability `weather-01.get_weather`
(lower case; characters a capability cannot hold become `-`), unless the
registration's `transport.tools` maps it: `{"get_weather": "weather.now"}` renames it,
`{"drop_table": null}` leaves it out. Its description (and title) is the text it is
routed by; its `inputSchema` is the capability's `input_schema`, so params are pulled
from the words; its annotations `readOnlyHint` and `idempotentHint` declare it `safe`
and `idempotent`. The registration keeps `transport.tool_of` (capability -> tool) for
delivery and `transport.instance` (the agent id) to find the instance's session.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import structlog
from pydantic import ValidationError

from agent_reach.errors import Conflict, ValidationFailed
from agent_reach.model.agents import CAPABILITY_PATTERN, AgentSpec, SkillSpec, normalize_capability
from agent_reach.registry.index import RegistryIndex

log = structlog.get_logger("agent_reach.federation")

MAX_TOOLS = 256  # AgentSpec's own capability limit
NAMES_FIELD = "tools"  # transport.tools: {tool: capability | null}, as the registrant wrote it
TOOL_OF_FIELD = "tool_of"  # transport.tool_of: {capability: tool}, written here
INSTANCE_FIELD = "instance"  # transport.instance: the agent id, whose session delivers
_CAPABILITY = re.compile(CAPABILITY_PATTERN)
_UNFIT = re.compile(r"[^a-z0-9_.-]")

Taken = Callable[[str], bool]  # is this capability offered by another agent already?


def taken_in(index: RegistryIndex, agent_id: str) -> Taken:
    """Capabilities that instances other than `agent_id` offer now."""

    def taken(capability: str) -> bool:
        return any(i.id != agent_id for i in index.by_capability.get(capability, ()))

    return taken


def names_of(transport_extra: dict[str, Any]) -> dict[str, str | None]:
    """The registration's mapping, checked: tool name -> capability, or None to leave out."""
    given = transport_extra.get(NAMES_FIELD) or {}
    if not isinstance(given, dict):
        raise ValidationFailed(
            "transport.tools maps tool names to capability names (or null)",
            field="transport.tools",
        )
    names: dict[str, str | None] = {}
    for tool, capability in given.items():
        if capability is None:
            names[str(tool)] = None
            continue
        tag = normalize_capability(capability)
        if not isinstance(tag, str) or not _CAPABILITY.match(tag):
            raise ValidationFailed(
                f"transport.tools maps {tool!r} to {capability!r}, which is not a capability name",
                field="transport.tools",
            )
        names[str(tool)] = tag
    return names


def capability_of(agent_id: str, tool: str, names: dict[str, str | None]) -> str | None:
    """The tool's capability: as mapped, else `<agent id>.<tool>`; None when left out."""
    if tool in names:
        return names[tool]
    return _UNFIT.sub("-", normalize_capability(f"{agent_id}.{tool}"))


def expand(
    spec: AgentSpec,
    tools: list[dict[str, Any]],
    server: dict[str, Any],
    taken: Taken,
    *,
    strict: bool,
) -> AgentSpec:
    """The registration with the tools as its capabilities.

    `strict` (at registration): a tool whose name makes no capability is refused (422
    `mcp_tool_name_invalid`), a name another agent (or another tool) has is refused
    (409 `capability_name_taken`). Not strict (the list re-read later): such tools are
    left out and logged, the others kept.
    """
    extra = spec.transport.model_extra or {}
    names = names_of(extra)
    tool_of: dict[str, str] = {}
    skills: list[SkillSpec] = []
    for tool in tools[:MAX_TOOLS]:
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            continue
        capability = capability_of(spec.id, name, names)
        if capability is None:
            continue
        problem = _problem(capability, name, tool_of, taken)
        if problem is not None:
            if strict:
                raise problem
            log.warning("mcp_tool_left_out", agent_id=spec.id, tool=name, reason=problem.message)
            continue
        tool_of[capability] = name
        skills.append(_skill(capability, name, tool))
    if not tool_of:
        raise ValidationFailed(
            "the MCP server offers no tool to route to",
            code="invalid_mcp_server",
            field="transport.endpoint",
        )
    given = server.get("serverInfo")
    info: dict[str, Any] = given if isinstance(given, dict) else {}
    body = {
        **spec.model_dump(),
        "capabilities": list(tool_of),
        "display_name": spec.display_name or str(info.get("title") or info.get("name") or "")[:200],
        "description": spec.description or str(server.get("instructions") or "")[:4000],
        "skills": skills,
        "transport": {
            **spec.transport.model_dump(),
            TOOL_OF_FIELD: tool_of,
            INSTANCE_FIELD: spec.id,
        },
    }
    return AgentSpec.model_validate(body)


def _problem(
    capability: str, tool: str, seen: dict[str, str], taken: Taken
) -> ValidationFailed | Conflict | None:
    if not _CAPABILITY.match(capability):
        return ValidationFailed(
            f"the tool {tool!r} makes the capability {capability!r}, which is not a valid "
            "name (at most 128 characters): map it in transport.tools, or map it to null",
            code="mcp_tool_name_invalid",
            field="transport.tools",
        )
    if capability in seen or taken(capability):
        holder = f"the tool {seen[capability]!r}" if capability in seen else "another agent"
        return Conflict(
            f"the capability {capability!r} (tool {tool!r}) is already {holder}'s: map the "
            "tool to another name in transport.tools",
            code="capability_name_taken",
            capability=capability,
        )
    return None


def _skill(capability: str, name: str, tool: dict[str, Any]) -> SkillSpec:
    """The tool's card: its words (title, description, name), its input schema, and what
    its annotations declare (`_declared`)."""
    words = [str(tool.get(k)) for k in ("title", "description") if tool.get(k)]
    words.append(name.replace("_", " "))
    description = " ".join(words)[:4000]
    declared = _declared(tool)
    try:
        return SkillSpec(
            capability=capability,
            description=description,
            input_schema=tool.get("inputSchema"),
            **declared,
        )
    except ValidationError:  # a schema we cannot use still leaves the tool routable by text
        return SkillSpec(capability=capability, description=description, **declared)


def _declared(tool: dict[str, Any]) -> dict[str, bool]:
    """The tool's annotations as declarations (docs/delivery.md): `readOnlyHint` -> safe,
    `idempotentHint` -> idempotent; a hint that is absent or not a boolean declares
    nothing (the registration's own word stands)."""
    annotations = tool.get("annotations")
    if not isinstance(annotations, dict):
        return {}
    hints = {
        "safe": annotations.get("readOnlyHint"),
        "idempotent": annotations.get("idempotentHint"),
    }
    return {field: hint for field, hint in hints.items() if isinstance(hint, bool)}
