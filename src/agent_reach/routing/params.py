"""Params from text: what a capability's `input_schema` can pull out of the user's words.

For each string property with a `pattern`, the first match in the text is the value (JSON
Schema patterns are unanchored); with an `enum`, a listed value that appears in the text
(the longest, when several do; case folded). Patterns are matched with Python's `re`, whose syntax
covers the ECMA-262 subset JSON Schema recommends; one that does not compile is skipped.

Number and integer properties take the numbers of the text (`quantities.py`: `3 kg`,
`2.5公斤`, `1,200`, `-5`), save those inside a string value already taken (`ORD-1234`'s
digits), by one rule that never guesses between two numbers:

1. A property whose name ends in a unit (`weight_kg`) takes the number written with that
   unit (`3 kg`, `3公斤`): filled when every such number has one value, left empty when
   they differ (`3 kg or 5 kg`).
2. Then, if exactly one property is left unfilled and the numbers left all have one
   value, that value fills it — unless the number carries a unit and the property's name
   another one (`3 km` never fills `weight_kg`). Numbers claimed in step 1 are not left,
   and neither is a property whose unit's numbers differed.
3. A value must fit the property: an integer for `integer` (`2.5` is not one), within
   `minimum`/`maximum` when given; otherwise the property stays empty.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.quantities import Quantity, quantities, unit_of_name

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
    """Each string property with a `pattern` or `enum` whose value the text holds, and
    each number or integer property a number of the text fills (see the module doc)."""
    said = text[:MAX_TEXT_CHARS]
    params: dict[str, Any] = {}
    taken: list[tuple[int, int]] = []  # where the string values stand in the text
    numeric: dict[str, dict[str, Any]] = {}
    for name, prop in _properties(schema).items():
        kind = _numeric_type(prop)
        if kind is not None:
            numeric[name] = prop
            continue
        if prop.get("type", "string") != "string":
            continue
        value = _enum_value(prop.get("enum"), said)
        if value is None and isinstance(prop.get("pattern"), str):
            compiled = _compiled(prop["pattern"])
            found = compiled.search(said) if compiled is not None else None
            if found:
                value = found.group(0)
                taken.append(found.span())
        if value is not None:
            params[name] = value
    if numeric:
        numbers = [
            q for q in quantities(said) if not any(a < q.end and q.start < b for a, b in taken)
        ]
        params |= _numbers(numeric, numbers)
    return params


def _numbers(properties: dict[str, dict[str, Any]], numbers: list[Quantity]) -> dict[str, Any]:
    """The number and integer properties the numbers fill, by the module doc's rule."""
    filled: dict[str, Any] = {}
    claimed: set[int] = set()
    units = {name: unit_of_name(name) for name in properties}
    for name, prop in properties.items():  # 1. by the unit the name carries
        own = [i for i, q in enumerate(numbers) if units[name] and q.unit == units[name]]
        claimed.update(own)
        value = _one_value([numbers[i] for i in own], prop)
        if value is not None:
            filled[name] = value
    open_ = [n for n in properties if n not in filled and not _any_with(numbers, units[n])]
    left = [q for i, q in enumerate(numbers) if i not in claimed]
    if len(open_) == 1 and left:  # 2. the one number left for the one property left
        name = open_[0]
        if all(q.unit is None or units[name] is None for q in left):
            value = _one_value(left, properties[name])
            if value is not None:
                filled[name] = value
    return filled


def _one_value(numbers: list[Quantity], prop: dict[str, Any]) -> int | float | None:
    """The value all `numbers` share, if it fits the property (3.)."""
    values = {q.value for q in numbers}
    if len(values) != 1:
        return None
    value = values.pop()
    if _numeric_type(prop) == "integer":
        if value != int(value):
            return None
        value = int(value)
    low, high = prop.get("minimum"), prop.get("maximum")
    if isinstance(low, int | float) and value < low:
        return None
    if isinstance(high, int | float) and value > high:
        return None
    return value


def _any_with(numbers: list[Quantity], unit: str | None) -> bool:
    return unit is not None and any(q.unit == unit for q in numbers)


def _numeric_type(prop: dict[str, Any]) -> str | None:
    """`integer` or `number` when that is the property's one non-null type."""
    declared = prop.get("type")
    if declared is None and isinstance(prop.get("anyOf"), list):  # pydantic's Optional
        declared = [option.get("type") for option in prop["anyOf"] if isinstance(option, dict)]
    kinds = declared if isinstance(declared, list) else [declared]
    kinds = [k for k in kinds if k != "null"]
    return kinds[0] if len(kinds) == 1 and kinds[0] in ("integer", "number") else None


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
