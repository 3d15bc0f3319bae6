"""Which instance factors are on by default: `AR_ROUTE_AFFINITY_DEFAULT`.

The original deployment's compose file set `capability,health,context`: only those
factors of the preset count, the others weigh 0 unless the policy sets them (a policy
with its own `weights` is used as written). Unset, every factor of the preset counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_reach.errors import InvalidRequest
from agent_reach.policy.weights import PRESETS

# The setting's names (the original deployment's) -> the policy's factor names.
SETTING_FACTORS = {
    "capability": "match",
    "health": "health",
    "context": "affinity",
    "load": "load",
    "success": "success",
    "latency": "latency",
    "quality": "quality",  # not in the original deployment's setting: issue 29
}


def with_factor_defaults(data: dict[str, Any], factors_on: Sequence[str] | None) -> dict[str, Any]:
    """The policy mapping with the preset's weights kept only for `factors_on`.

    `InvalidRequest` when that leaves no positive weight (the policy must then set some).
    """
    if factors_on is None or "weights" in data:
        return data
    preset = data.get("preset", "default")
    if preset not in PRESETS:
        return data  # the policy's own validation names the unknown preset
    on = {SETTING_FACTORS[name] for name in factors_on}
    weights = {factor: w for factor, w in PRESETS[preset].items() if factor in on}
    if not any(weights.values()):
        raise InvalidRequest(
            f"AR_ROUTE_AFFINITY_DEFAULT={','.join(factors_on)} leaves no factor of preset "
            f"{preset!r} on: name one of {sorted(PRESETS[preset])} or set weights in the policy"
        )
    return {**data, "weights": weights}
