"""`GET /.well-known/agent-card.json` (and the v0.2 `/.well-known/agent.json`, `GET /a2a`,
the URL the card names, and `/a2a/.well-known/agent-card.json`, where a client given that
URL looks): the coordinator as an A2A v1.0 agent.

It offers the JSON-RPC binding (v1.0, and v0.3 method names at the same URL) and the
HTTP+JSON binding (`/a2a/message:send`, ...), streaming and push notifications. Skills are
the live capabilities. With keys on, the card names the Bearer scheme, and
lists the skills the presented key may invoke (none without a key): the catalog is not
public when the rest of the API is not.
"""

from __future__ import annotations

from typing import Any

from agent_reach.faces.catalog import LiveCapability

A2A_VERSION = "1.0"
CARD_PATH = "/.well-known/agent-card.json"
RPC_PATH = "/a2a"
# v1.0 / v0.3, v0.2, and under the endpoint the card names: clients given `<base>/a2a`
# look for the card there
CARD_PATHS = (CARD_PATH, "/.well-known/agent.json", RPC_PATH + CARD_PATH)


def agent_card(
    base_url: str, version: str, skills: list[LiveCapability], *, secured: bool
) -> dict[str, Any]:
    """The card's JSON (the v1.0 wire form, camelCase)."""
    url = base_url.rstrip("/") + RPC_PATH
    card: dict[str, Any] = {
        "name": "Agent-Reach",
        "description": (
            "A coordinator that routes each message to the best live agent, by the skill "
            'named in message metadata {"capability": <skill id>} or by the message text. '
            "To find the few skills that fit a request among many: POST /v1/route "
            '{"text", "top_k"} answers the top_k best ones you may invoke (`ranked`), and '
            "the MCP endpoint /mcp has the same search as its find_tools tool."
        ),
        "version": version,
        "supportedInterfaces": [
            {"url": url, "protocolBinding": binding, "protocolVersion": version}
            for binding, version in (
                ("JSONRPC", A2A_VERSION),
                ("HTTP+JSON", A2A_VERSION),
                ("JSONRPC", "0.3"),
            )
        ],
        "capabilities": {"streaming": True, "pushNotifications": True},
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [
            {
                "id": skill.tag,
                "name": skill.tag,
                "description": skill.description or skill.tag,
                "tags": [skill.tag],
                "examples": skill.examples,
            }
            for skill in skills
        ],
    }
    if secured:
        card["securitySchemes"] = {
            "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "API key"}}
        }
        card["securityRequirements"] = [{"schemes": {"bearer": {"list": []}}}]
    return card
