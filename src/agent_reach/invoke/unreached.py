"""Why a request was suspended: each instance that could have taken it, and why it did not.

The 202 answer of a suspended request carries this list (and so does its task), so the
caller reads "agent x: unknown, agent_unreachable: connection refused" — or "disabled
by admin at ..." — at once instead of a task to poll with no reason given. When its time
runs out, its error says the same: what was true of the instances, and how its last
replay failed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from agent_reach.errors import NoInstance
from agent_reach.model.invocations import Attempt
from agent_reach.registry.index import RegistryIndex

# The kill switch's records (mesh/kill_switch.py): agent id -> {"by", "at"}.
Disabled = Mapping[str, Mapping[str, Any]]


def unreached_instances(
    index: RegistryIndex,
    capability: str,
    attempts: Sequence[Attempt],
    now: float,
    disabled: Disabled,
) -> list[dict[str, Any]]:
    """`{agent_id, status, last_error, disabled?}` for the capability's instances and
    any other instance tried (a generic agent): this request's own failure with an
    instance first, else the instance's latest failed probe or delivery; `disabled`
    (who, when) for an instance an admin took out of routing."""
    failed = {a.agent_id: f"{a.outcome}: {a.error}" for a in attempts if a.outcome != "ok"}
    instances = list(index.instances_of(capability))
    instances += [
        i for agent_id in failed if (i := index.by_id.get(agent_id)) and i not in instances
    ]
    found = []
    for i in instances:
        entry: dict[str, Any] = {
            "agent_id": i.id,
            "status": i.status(now),
            "last_error": failed.get(i.id, i.last_error),
        }
        record = disabled.get(i.id)
        if record is not None:
            entry["disabled"] = {"by": record.get("by"), "at": record.get("at")}
        found.append(entry)
    return found


def expired(
    capability: str, instances: list[dict[str, Any]], last_failure: dict[str, Any] | None
) -> NoInstance:
    """503 `no_instance` for a suspended request whose time ran out, saying what was
    true: the instances an admin disabled, else how its last replay failed, else that
    no instance became live."""
    off = [i for i in instances if "disabled" in i]
    if off:
        reason = "; ".join(f"{i['agent_id']} is {_disabled_by(i['disabled'])}" for i in off)
    elif last_failure is not None:
        attempts = [a for a in last_failure.get("attempts") or [] if isinstance(a, dict)]
        outcomes = ", ".join(_outcome(a) for a in attempts)
        reason = "its last replay failed: " + (
            f"{outcomes} (tried and failed)"
            if outcomes
            else f"{last_failure.get('code')}: {last_failure.get('message')}"
        )
    else:
        states = ", ".join(f"{i['agent_id']} {i['status']}" for i in instances) or "none"
        reason = f"no instance of {capability!r} became live (instances: {states})"
    details: dict[str, Any] = {"instances": instances}
    if last_failure is not None:
        details["last_replay"] = last_failure
    return NoInstance(f"the suspended request's time ran out: {reason}", **details)


def _disabled_by(record: Mapping[str, Any]) -> str:
    at = record.get("at")
    when = (
        datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")
        if isinstance(at, int | float)
        else "an unknown time"
    )
    return f"disabled (kill switch) by {record.get('by')} at {when}"


def _outcome(attempt: dict[str, Any]) -> str:
    status = attempt.get("http_status")
    return f"{attempt.get('agent_id')} {attempt.get('outcome')}" + (
        f" (HTTP {status})" if status else ""
    )
