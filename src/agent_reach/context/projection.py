"""Projections: which part of a context a reader sees, named by dotted field paths.

``product`` is the top-level field, ``user.intent`` the field ``intent`` inside the
object ``user``. A path that leads nowhere (a missing key, or through something that is
not an object) is simply absent from the projection; it is never an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from agent_reach.errors import ValidationFailed
from agent_reach.model.agents import FIELD_PATH_PATTERN

# One key per step: no dots (the separator), commas (the list separator of ?fields=) or
# control characters; anything else, Chinese included, is a key as written.
FIELD_PATH = re.compile(FIELD_PATH_PATTERN)
MAX_PATH_CHARS = 256
MAX_FIELDS = 64  # as many paths as an agent may declare in `context_fields`

Path = tuple[str, ...]


def check_field_path(path: str) -> str:
    """`path` when it is a usable field path; `ValidationFailed` (invalid_projection) if not."""
    if len(path) > MAX_PATH_CHARS or not FIELD_PATH.fullmatch(path):
        raise ValidationFailed(
            f"{path[:MAX_PATH_CHARS]!r} is not a field path: keys joined by '.', "
            f"no commas or control characters, at most {MAX_PATH_CHARS} characters",
            code="invalid_projection",
        )
    return path


def parse_fields(text: str) -> tuple[str, ...]:
    """The paths of a ``?fields=product,user.intent`` list, checked and without repeats."""
    paths = tuple(dict.fromkeys(check_field_path(part.strip()) for part in text.split(",")))
    if len(paths) > MAX_FIELDS:
        raise ValidationFailed(
            f"at most {MAX_FIELDS} fields may be asked for at once", code="invalid_projection"
        )
    return paths


def split_path(path: str) -> Path:
    return tuple(path.split("."))


def is_within(path: Path, ancestor: Path) -> bool:
    """True when `path` is `ancestor` or lies inside it."""
    return path[: len(ancestor)] == ancestor


def covers(fields: Sequence[str] | None, path: Path) -> bool:
    """True when `path` lies inside one of `fields` (None: every field)."""
    return fields is None or any(is_within(path, split_path(field)) for field in fields)


def narrow(
    granted: Sequence[str] | None, requested: Sequence[str] | None
) -> tuple[str, ...] | None:
    """What a reader granted `granted` sees when it asks for `requested` (None: all).

    A requested path inside a granted one is kept; a granted path inside a requested
    one is what the request gets of it; anything else is out of reach.
    """
    if granted is None:
        return None if requested is None else tuple(requested)
    if requested is None:
        return tuple(granted)
    kept: list[str] = []
    for want in requested:
        for grant in granted:
            if is_within(split_path(want), split_path(grant)):
                kept.append(want)
            elif is_within(split_path(grant), split_path(want)):
                kept.append(grant)
    return tuple(dict.fromkeys(kept))


def top_level(fields: Iterable[str]) -> set[str]:
    """The top-level names the paths start with (which appended lists a read must load)."""
    return {field.partition(".")[0] for field in fields}


def project(document: dict[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """The part of `document` the paths name, nested as in the document."""
    paths = list(dict.fromkeys(split_path(field) for field in fields))
    result: dict[str, Any] = {}
    for path in paths:
        if any(other != path and is_within(path, other) for other in paths):
            continue  # inside another path, which brings it along
        value: Any = document
        for key in path:
            if not isinstance(value, dict) or key not in value:
                break
            value = value[key]
        else:
            node = result
            for key in path[:-1]:
                node = node.setdefault(key, {})
            node[path[-1]] = value
    return result
