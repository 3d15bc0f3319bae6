"""Templates in step params: `{{steps.<id>.result.<path>}}`, `{{context.<p>}}`, `{{input.<p>}}`.

A string that is exactly one template becomes the value it names, with its JSON type;
templates inside a longer string are interpolated as text (objects and lists as JSON).
A path is dot-separated; a part that is a number indexes a list.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson

Source = Literal["steps", "context", "input"]
_TEMPLATE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_PART = re.compile(r"^[^\s.{}]+$")


class TemplateError(ValueError):
    """A template that cannot be read, or names a value that is not there."""


@dataclass(frozen=True, slots=True)
class Reference:
    """What one template names: a source, for `steps` the step id, and the path within."""

    source: Source
    path: tuple[str, ...]
    step: str | None = None

    @property
    def text(self) -> str:
        head = f"steps.{self.step}.result" if self.source == "steps" else self.source
        return "{{" + ".".join((head, *self.path)) + "}}"


def parse(expression: str) -> Reference:
    """The reference inside `{{ ... }}`; `TemplateError` when it has no known form."""
    parts = expression.split(".")
    if not all(_PART.match(part) for part in parts):
        raise TemplateError(f"{{{{{expression}}}}} is not a template path")
    if parts[0] in ("context", "input"):
        return Reference(parts[0], tuple(parts[1:]))  # type: ignore[arg-type]
    if parts[0] == "steps" and len(parts) >= 3 and parts[2] == "result":
        return Reference("steps", tuple(parts[3:]), parts[1])
    raise TemplateError(f"{{{{{expression}}}}} is not steps.<id>.result..., context... or input...")


def references(value: Any) -> Iterator[Reference]:
    """Every template in `value` (strings inside objects and lists too)."""
    if isinstance(value, str):
        for match in _TEMPLATE.finditer(value):
            yield parse(match[1])
    elif isinstance(value, dict):
        for item in value.values():
            yield from references(item)
    elif isinstance(value, list):
        for item in value:
            yield from references(item)


def has_templates(value: Any) -> bool:
    return next(references(value), None) is not None


@dataclass(frozen=True, slots=True)
class Scope:
    """The values templates may read: finished steps' results, the context, the input."""

    steps: Mapping[str, Any]
    context: Any
    input: Mapping[str, Any]

    def lookup(self, reference: Reference) -> Any:
        if reference.source == "steps":
            step = str(reference.step)
            if step not in self.steps:
                raise TemplateError(f"{reference.text}: step {step!r} has no result")
            value = self.steps[step]
        else:
            value = self.context if reference.source == "context" else self.input
        for part in reference.path:
            value = _child(value, part, reference)
        return value


def resolve(value: Any, scope: Scope) -> Any:
    """`value` with every template replaced (typed when whole, as text inside strings)."""
    if isinstance(value, str):
        whole = _TEMPLATE.fullmatch(value)
        if whole:
            return scope.lookup(parse(whole[1]))
        if "{{" not in value:
            return value
        return _TEMPLATE.sub(lambda m: _as_text(scope.lookup(parse(m[1]))), value)
    if isinstance(value, dict):
        return {key: resolve(item, scope) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, scope) for item in value]
    return value


def _child(value: Any, part: str, reference: Reference) -> Any:
    if isinstance(value, dict) and part in value:
        return value[part]
    if isinstance(value, list) and part.isdigit() and int(part) < len(value):
        return value[int(part)]
    raise TemplateError(f"{reference.text}: there is no {part!r} in the value")


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()
