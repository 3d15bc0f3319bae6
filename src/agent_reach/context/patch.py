"""JSON merge patch (RFC 7386) and the fields a patch would change.

A patch object is merged key by key: ``null`` deletes the key, an object merges into
the object already there, anything else (arrays included) replaces the value whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agent_reach.context.projection import Path

_MISSING = object()


def merge_patch(target: Any, patch: Any) -> Any:
    """`target` with `patch` applied (RFC 7386, section 2); neither argument is changed."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def touched_paths(
    target: dict[str, Any], patch: dict[str, Any], prefix: Path = ()
) -> Iterator[Path]:
    """The field paths whose value `merge_patch(target, patch)` would set or delete.

    Merging into an existing object touches only the keys inside it; creating an object
    where there was none touches what is created in it (or the path itself, when it
    comes out empty); replacing anything else touches the path itself.
    """
    for key, value in patch.items():
        path = (*prefix, key)
        current = target.get(key, _MISSING)
        if value is None:
            if current is not _MISSING:
                yield path
        elif isinstance(value, dict) and isinstance(current, dict):
            yield from touched_paths(current, value, path)
        elif isinstance(value, dict) and current is _MISSING:
            yield from list(touched_paths({}, value, path)) or [path]
        else:
            yield path
