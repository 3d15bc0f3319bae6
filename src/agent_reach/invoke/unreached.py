"""Why a request was suspended: each instance that could have taken it, and why it did not.

The 202 answer of a suspended request carries this list (and so does its task), so the
caller reads "agent x: unknown, agent_unreachable: connection refused" at once instead
of a task to poll with no reason given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_reach.model.invocations import Attempt
from agent_reach.registry.index import RegistryIndex


def unreached_instances(
    index: RegistryIndex, capability: str, attempts: Sequence[Attempt], now: float
) -> list[dict[str, Any]]:
    """`{agent_id, status, last_error}` for the capability's instances and any other
    instance tried (a generic agent): this request's own failure with an instance first,
    else the instance's latest failed probe or delivery."""
    failed = {a.agent_id: f"{a.outcome}: {a.error}" for a in attempts if a.outcome != "ok"}
    instances = list(index.instances_of(capability))
    instances += [
        i for agent_id in failed if (i := index.by_id.get(agent_id)) and i not in instances
    ]
    return [
        {
            "agent_id": i.id,
            "status": i.status(now),
            "last_error": failed.get(i.id, i.last_error),
        }
        for i in instances
    ]
