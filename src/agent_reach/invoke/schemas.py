"""Payloads checked against a capability's declared `input_schema` before any delivery.

Schemas are JSON Schema (the draft each one names, 2020-12 by default), checked when
registered (`model.agents.check_schema`); a `$ref` outside the schema is never fetched.
"""

from __future__ import annotations

from typing import Any

import orjson
from jsonschema import validators
from jsonschema.protocols import Validator

from agent_reach.errors import ValidationFailed
from agent_reach.model.agents import AgentSpec

MAX_PROBLEMS = 20  # enough to fix a payload; a huge bad payload must not make a huge answer
_CACHE_SIZE = 1024  # distinct schemas compiled; registrations are few


def spec_schema(spec: AgentSpec, capability: str) -> dict[str, Any] | None:
    """The capability's own skill schema, else the agent-wide one, else None."""
    for skill in spec.skills:
        if skill.capability == capability and skill.input_schema is not None:
            return skill.input_schema
    return spec.input_schema


class PayloadSchemas:
    """Compiled validators by schema text, so each schema is compiled once."""

    def __init__(self) -> None:
        self._compiled: dict[bytes, Validator] = {}

    def check(self, schema: dict[str, Any], payload: Any, capability: str) -> None:
        """`ValidationFailed` (422 `payload_invalid`) listing where the payload breaks it."""
        validator = self._validator(schema)
        errors = sorted(validator.iter_errors(payload), key=lambda e: list(e.absolute_path))
        if not errors:
            return
        problems = [
            {"path": "/".join(str(p) for p in e.absolute_path), "message": e.message}
            for e in errors[:MAX_PROBLEMS]
        ]
        raise ValidationFailed(
            f"the payload does not match the input_schema of {capability!r}",
            code="payload_invalid",
            field="payload",
            problems=problems,
        )

    def _validator(self, schema: dict[str, Any]) -> Validator:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
        validator = self._compiled.get(key)
        if validator is None:
            if len(self._compiled) >= _CACHE_SIZE:
                self._compiled.clear()
            validator = validators.validator_for(schema)(schema)
            self._compiled[key] = validator
        return validator
