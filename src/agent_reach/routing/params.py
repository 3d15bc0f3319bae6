"""Params from text: what a capability's `input_schema` can pull out of the user's words.

For each string property with a `pattern`, the first match in the text is the value (JSON
Schema patterns are unanchored); with an `enum`, a listed value that appears in the text
(the longest, when several do; case folded). Patterns are matched with Python's `re`, whose syntax
covers the ECMA-262 subset JSON Schema recommends; one that does not compile is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from agent_reach.registry.index import RegistryIndex

MAX_TEXT_CHARS = 2_000  # patterns run on at most this much text: a bound on regex time
PATTERN_CACHE = 1_024  # compiled patterns kept


def schema_of(index: RegistryIndex, capability: str) -> Mapping[str, Any] | None:
    """The `input_schema` a live registration declares for the capability, if any."""
    for instance in index.instances_of(capability):
        spec = instance.spec
        for skill in spec.skills:
            if skill.capability == capability and skill.input_schema:
                return skill.input_schema
        if spec.input_schema:
            return spec.input_schema
    return None


def extract_params(schema: Mapping[str, Any], text: str) -> dict[str, Any]:
    """Each string property with a `pattern` or `enum` whose value the text holds."""
    said = text[:MAX_TEXT_CHARS]
    params: dict[str, Any] = {}
    for name, prop in _properties(schema).items():
        if prop.get("type", "string") != "string":
            continue
        value = _enum_value(prop.get("enum"), said)
        if value is None and isinstance(prop.get("pattern"), str):
            compiled = _compiled(prop["pattern"])
            found = compiled.search(said) if compiled is not None else None
            value = found.group(0) if found else None
        if value is not None:
            params[name] = value
    return params


def missing_properties(schema: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The schema's properties that have no value yet (for an LLM to fill)."""
    return {n: p for n, p in _properties(schema).items() if n not in params}


def with_payload(params: dict[str, Any], schema: Mapping[str, Any], payload: Any) -> dict[str, Any]:
    """Fields the caller gave in `payload` win over what was pulled out of the text."""
    if not isinstance(payload, dict):
        return params
    given = {n: payload[n] for n in _properties(schema) if n in payload}
    return {**params, **given}


def _properties(schema: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    properties = schema.get("properties")
    return properties if isinstance(properties, dict) else {}


def _enum_value(options: Any, text: str) -> str | None:
    if not isinstance(options, list):
        return None
    folded = text.casefold()
    found = [o for o in options if isinstance(o, str) and o and o.casefold() in folded]
    return max(found, key=len) if found else None


@lru_cache(maxsize=PATTERN_CACHE)
def _compiled(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None
