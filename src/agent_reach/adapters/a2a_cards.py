"""A2A agent cards (v1.0 and v0.3): where the JSON-RPC endpoint is, what the skills are.

v1.0 cards list `supportedInterfaces` ({url, protocolBinding, protocolVersion}); v0.3
cards name `url` with `preferredTransport` and `additionalInterfaces`. The endpoint
is always the one the card names, never assumed from the card's own address.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from agent_reach.errors import ValidationFailed
from agent_reach.model.agents import CAPABILITY_PATTERN, normalize_capability

A2AVersion = Literal["1.0", "0.3"]
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")  # new, then older
MAX_CARD_BYTES = 256 * 1024  # a card with hundreds of skills is ~100 KiB; more is not a card
MAX_SKILLS = 256  # AgentSpec's own capability limit
_CAPABILITY = re.compile(CAPABILITY_PATTERN)


@dataclass(frozen=True, slots=True)
class CardSkill:
    capabilities: list[str]
    description: str
    examples: list[str]


@dataclass(frozen=True, slots=True)
class AgentCard:
    """What a registration takes from a card."""

    name: str
    description: str
    version: A2AVersion
    rpc_url: str
    skills: list[CardSkill]
    streaming: bool = False  # `capabilities.streaming`: it answers message streams


def card_urls(endpoint: str) -> list[str]:
    """The URLs to try: the endpoint itself when it names a card, else the well-known ones."""
    parts = urlsplit(endpoint)
    if parts.path.endswith(".json"):
        return [endpoint]
    base = endpoint.rstrip("/")
    return [base + path for path in CARD_PATHS]


def _refuse(message: str) -> ValidationFailed:
    return ValidationFailed(message, code="invalid_agent_card", field="transport.endpoint")


def _jsonrpc_interface(card: dict[str, Any]) -> tuple[str, A2AVersion]:
    interfaces = card.get("supportedInterfaces")
    if isinstance(interfaces, list):
        for item in interfaces:
            if not isinstance(item, dict) or str(item.get("protocolBinding", "")).upper() != (
                "JSONRPC"
            ):
                continue
            version = str(item.get("protocolVersion", "1.0"))
            if isinstance(item.get("url"), str):
                return item["url"], "0.3" if version.startswith("0.") else "1.0"
        raise _refuse("the agent card offers no JSONRPC interface")
    if isinstance(card.get("url"), str):
        preferred = str(card.get("preferredTransport") or "JSONRPC").upper()
        if preferred == "JSONRPC":
            return card["url"], "0.3"
        for item in card.get("additionalInterfaces") or []:
            if isinstance(item, dict) and str(item.get("transport", "")).upper() == "JSONRPC":
                return str(item.get("url")), "0.3"
        raise _refuse("the agent card offers no JSONRPC interface")
    raise _refuse("the agent card names no interface (neither supportedInterfaces nor url)")


def _skill(raw: Any) -> CardSkill | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
        return None
    tags = [raw["id"], *[t for t in raw.get("tags") or [] if isinstance(t, str)]]
    spelled = (normalize_capability(t).replace(" ", "-") for t in tags)
    # A tag that cannot be a capability (`中文`, `a/b`) still feeds text routing as words.
    capabilities = list(dict.fromkeys(t for t in spelled if _CAPABILITY.match(t)))
    if not capabilities:
        return None
    words = [str(raw.get(key)) for key in ("name", "description") if raw.get(key)]
    description = " ".join([*words, *tags])
    examples = [e for e in raw.get("examples") or [] if isinstance(e, str) and e.strip()]
    return CardSkill(capabilities, description[:4000], [e[:500] for e in examples][:100])


def parse_card(card: Any) -> AgentCard:
    """The card's name, version, JSON-RPC endpoint and skills; 422 when it is not a card."""
    if not isinstance(card, dict) or not isinstance(card.get("name"), str):
        raise _refuse("the answer is not an A2A agent card (no name)")
    rpc_url, version = _jsonrpc_interface(card)
    skills = [s for s in (_skill(raw) for raw in card.get("skills") or []) if s is not None]
    if not skills:
        raise _refuse("the agent card lists no skills: nothing to route to")
    if len(skills) > MAX_SKILLS:
        raise _refuse(f"the agent card lists more than {MAX_SKILLS} skills")
    return AgentCard(
        name=card["name"][:200],
        description=str(card.get("description") or "")[:4000],
        version=version,
        rpc_url=rpc_url,
        skills=skills,
        streaming=isinstance(card.get("capabilities"), dict)
        and card["capabilities"].get("streaming") is True,
    )
