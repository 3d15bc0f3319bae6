"""Aggregation: the run's `result` from its steps' results.

By default a map of step id -> result (served steps only). `merge` deep-merges the
object results of the listed steps, earlier ids winning, and lists every conflict:
the field, each step's value, and who won (the CRM-vs-finance case). A summarizer
capability is a step of its own (`running.py`); `summary_payload` is what it gets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Conflict = dict[str, Any]


def merge(results: Mapping[str, Any], priority: Sequence[str]) -> tuple[Any, list[Conflict]]:
    """Deep-merge the results of `priority`'s steps (those that have one), earlier winning.

    Objects merge key by key; any other pair of different values at one field is a
    conflict, kept by the earlier step. A step whose result is not an object only
    counts when no earlier step gave one.
    """
    merged: Any = None
    owners: dict[str, str] = {}  # field path -> the step whose value stands there
    conflicts: dict[str, Conflict] = {}
    for step_id in priority:
        if step_id not in results:
            continue
        value = results[step_id]
        if merged is None:
            merged = _copy(value)
            _claim(owners, "", value, step_id)
        elif isinstance(merged, dict) and isinstance(value, dict):
            _merge_into(merged, value, "", step_id, owners, conflicts)
    return merged, list(conflicts.values())


def summary_payload(intent: str | None, results: Mapping[str, Any]) -> dict[str, Any]:
    """What a summarizer capability receives: the intent and every served step's result."""
    return {"intent": intent, "results": dict(results)}


def _merge_into(
    target: dict[str, Any],
    source: Mapping[str, Any],
    prefix: str,
    step_id: str,
    owners: dict[str, str],
    conflicts: dict[str, Conflict],
) -> None:
    for key, value in source.items():
        path = f"{prefix}{key}"
        if key not in target:
            target[key] = _copy(value)
            _claim(owners, path, value, step_id)
        elif isinstance(target[key], dict) and isinstance(value, dict):
            _merge_into(target[key], value, f"{path}.", step_id, owners, conflicts)
        elif target[key] != value:
            conflict = conflicts.setdefault(
                path,
                {"field": path, "values": {owners[path]: target[key]}, "winner": owners[path]},
            )
            conflict["values"][step_id] = value


def _claim(owners: dict[str, str], prefix: str, value: Any, step_id: str) -> None:
    """Record `step_id` as the owner of the field `prefix` and of every field under it."""
    if prefix:
        owners[prefix] = step_id
    if isinstance(value, dict):
        for key, item in value.items():
            _claim(owners, f"{prefix}{'.' if prefix else ''}{key}", item, step_id)


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return list(value)
    return value
