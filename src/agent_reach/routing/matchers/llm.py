"""LLM matcher: ask an OpenAI-compatible chat endpoint which capability the text wants.

Asked only when the cheaper matchers are unsure (the policy's `confident_at`). The prompt
lists every capability with a short description and asks for one JSON object; anything
else (an unknown capability, a malformed answer, an HTTP error, a timeout) counts as "no
opinion", so a misbehaving model can only fail to help, never misroute by crashing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import orjson
import structlog

from agent_reach.config import Settings
from agent_reach.routing.catalog import CapabilityCard

log = structlog.get_logger("agent_reach.routing")

DESCRIPTION_CHARS = 160  # per capability in the prompt: enough for a card's first line
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
INSTRUCTIONS = """\
You route user requests to capabilities. The capabilities are:
{capabilities}

Answer with one JSON object and nothing else:
{{"capability": "<one tag from the list, or null if none fits>", "confidence": <0 to 1>}}"""


FILL_INSTRUCTIONS = """\
Pull these fields out of the user's request. The fields, as JSON Schema properties:
{properties}

Answer with one JSON object mapping field names to values, and nothing else. Leave out
every field the request does not state."""


class LlmMatcher:
    """Intent parsing by any OpenAI-compatible `POST {llm_url}/chat/completions`."""

    name = "llm"

    def __init__(self, settings: Settings, client: httpx.AsyncClient | None = None) -> None:
        if not settings.llm_url:
            raise ValueError("LlmMatcher needs settings.llm_url")
        self._url = settings.llm_url.rstrip("/") + "/chat/completions"
        self._model = settings.llm_model
        self._timeout_s = settings.llm_timeout_s
        key = settings.llm_api_key
        self._client = client or httpx.AsyncClient(
            headers={"authorization": f"Bearer {key}"} if key else {}
        )
        self._fit: tuple[str, frozenset[str]] = ("", frozenset())  # prompt, tags: one swap

    def fit(self, catalog: Mapping[str, CapabilityCard], background: Sequence[str] = ()) -> None:
        lines = "\n".join(f"- {tag}: {_summary(card)}" for tag, card in catalog.items())
        self._fit = (INSTRUCTIONS.format(capabilities=lines), frozenset(catalog))

    def trial(self, catalog: Mapping[str, CapabilityCard], background: Sequence[str] = ()) -> None:
        return None  # a model's own confidence is taken as it is, never calibrated

    async def scores(self, text: str, without: frozenset[str] = frozenset()) -> dict[str, float]:
        prompt, capabilities = self._fit
        if not capabilities - without:
            return {}
        content = await self._ask(prompt, text)
        if content is None:
            return {}
        return _parse(content, capabilities - without)

    async def fill_params(self, text: str, properties: Mapping[str, Any]) -> dict[str, Any]:
        """Values for `properties` stated in `text`; {} on any failure. A value is kept only
        if it is a string, number or boolean that fits its property's enum and pattern."""
        prompt = FILL_INSTRUCTIONS.format(properties=orjson.dumps(properties).decode())
        content = await self._ask(prompt, text)
        answer = _json_object(content)
        if answer is None:
            return {}
        return {
            name: value
            for name, value in answer.items()
            if name in properties and _fits(properties[name], value)
        }

    async def _ask(self, system: str, text: str) -> Any:
        body = {
            "model": self._model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": text},
            ],
        }
        try:
            response = await self._client.post(self._url, json=body, timeout=self._timeout_s)
            response.raise_for_status()
            return response.json()["choices"][0]["message"]["content"]
        except (httpx.HTTPError, ValueError, LookupError, TypeError) as exc:
            log.warning("llm_call_failed", error=type(exc).__name__, url=self._url)
            return None

    async def aclose(self) -> None:
        await self._client.aclose()


def _summary(card: CapabilityCard) -> str:
    text = card.descriptions[0] if card.descriptions else "; ".join(card.examples[:3])
    return " ".join(text.split())[:DESCRIPTION_CHARS] or "(no description)"


def _json_object(content: Any) -> dict[str, Any] | None:
    """The first JSON object in a model's answer, or None."""
    found = _JSON_OBJECT.search(content) if isinstance(content, str) else None
    try:
        answer = orjson.loads(found.group()) if found else None
    except orjson.JSONDecodeError:
        return None
    return answer if isinstance(answer, dict) else None


def _fits(prop: Any, value: Any) -> bool:
    """The value has its property's type, and its enum and pattern allow it."""
    if not isinstance(prop, dict):
        return False
    if isinstance(value, bool):
        return prop.get("type") == "boolean"
    if isinstance(value, int | float):
        return prop.get("type") in ("number", "integer")
    if not isinstance(value, str):
        return False
    enum = prop.get("enum")
    if isinstance(enum, list) and value not in enum:
        return False
    pattern = prop.get("pattern")
    if isinstance(pattern, str):
        try:
            return re.search(pattern, value) is not None
        except re.error:
            return False
    return True


def _parse(content: Any, capabilities: frozenset[str]) -> dict[str, float]:
    """`{"capability": tag, "confidence": x}` from the answer, or {} for anything else."""
    answer = _json_object(content)
    if answer is None:
        return {}
    tag, confidence = answer.get("capability"), answer.get("confidence")
    if not isinstance(tag, str) or tag not in capabilities or isinstance(confidence, bool):
        return {}
    if not isinstance(confidence, int | float) or not 0 <= confidence <= 1:
        return {}
    return {tag: float(confidence)}
