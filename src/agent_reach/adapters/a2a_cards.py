"""A2A agent cards (v1.0 and v0.3): which interface to deliver to, what the skills are.

v1.0 cards list `supportedInterfaces` ({url, protocolBinding, protocolVersion}), the
agent's preferred first; v0.3 cards name `url` with `preferredTransport` and
`additionalInterfaces`. The interface taken is the first the card lists that we speak:
JSON-RPC (v1.0 or v0.3) or HTTP+JSON (v1.0; a v0.3 REST interface is passed over). The
endpoint is always the one the card names, never assumed from the card's own address.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from agent_reach.errors import ValidationFailed
from agent_reach.model.agents import CAPABILITY_PATTERN, normalize_capability

A2AVersion = Literal["1.0", "0.3"]
Binding = Literal["JSONRPC", "HTTP+JSON"]
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")  # new, then older
MAX_CARD_BYTES = 256 * 1024  # a card with hundreds of skills is ~100 KiB; more is not a card
MAX_SKILLS = 256  # AgentSpec's own capability limit
_CAPABILITY = re.compile(CAPABILITY_PATTERN)


# An A2A agent declares in its card's `capabilities.extensions` that it runs a message id
# at most once (a re-sent message is answered, not run again): the registration's
# `idempotent` (docs/delivery.md), so an unknown outcome may be re-sent to it.
IDEMPOTENT_EXTENSION = "urn:agent-reach:a2a:idempotent:v1"
# ... and that its skills have no side effects: the registration's `safe`, so an unknown
# outcome may be re-sent to any instance and a remembered answer may stand in.
SAFE_EXTENSION = "urn:agent-reach:a2a:safe:v1"


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
    idempotent: bool = False  # declares IDEMPOTENT_EXTENSION: a re-sent message runs once
    safe: bool = False  # declares SAFE_EXTENSION: its skills have no side effects
    binding: Binding = "JSONRPC"


def _declares(card: dict[str, Any], uri: str) -> bool:
    """Whether the card's `capabilities.extensions` lists the extension `uri`."""
    capabilities = card.get("capabilities")
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, list) and any(
        isinstance(e, dict) and e.get("uri") == uri for e in extensions
    )


def card_urls(endpoint: str) -> list[str]:
    """The URLs to try: the endpoint itself when it names a card, else the well-known ones."""
    parts = urlsplit(endpoint)
    if parts.path.endswith(".json"):
        return [endpoint]
    base = endpoint.rstrip("/")
    return [base + path for path in CARD_PATHS]


def _refuse(message: str) -> ValidationFailed:
    return ValidationFailed(message, code="invalid_agent_card", field="transport.endpoint")


def _interface(card: dict[str, Any]) -> tuple[str, A2AVersion, Binding]:
    interfaces = card.get("supportedInterfaces")
    if isinstance(interfaces, list):
        for item in interfaces:
            if not isinstance(item, dict) or not isinstance(item.get("url"), str):
                continue
            binding = str(item.get("protocolBinding", "")).upper()
            version: A2AVersion = (
                "0.3" if str(item.get("protocolVersion", "1.0")).startswith("0.") else "1.0"
            )
            if binding == "JSONRPC" or (binding == "HTTP+JSON" and version == "1.0"):
                return item["url"], version, "JSONRPC" if binding == "JSONRPC" else "HTTP+JSON"
        raise _refuse("the agent card offers no JSONRPC interface and no HTTP+JSON one")
    if isinstance(card.get("url"), str):
        preferred = str(card.get("preferredTransport") or "JSONRPC").upper()
        if preferred == "JSONRPC":
            return card["url"], "0.3", "JSONRPC"
        for item in card.get("additionalInterfaces") or []:
            if isinstance(item, dict) and str(item.get("transport", "")).upper() == "JSONRPC":
                return str(item.get("url")), "0.3", "JSONRPC"
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
    """The card's name, version, interface and skills; 422 when it is not a card."""
    if not isinstance(card, dict) or not isinstance(card.get("name"), str):
        raise _refuse("the answer is not an A2A agent card (no name)")
    rpc_url, version, binding = _interface(card)
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
        binding=binding,
        idempotent=_declares(card, IDEMPOTENT_EXTENSION),
        safe=_declares(card, SAFE_EXTENSION),
    )
