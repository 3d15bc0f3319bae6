"""Instance scoring: each factor in [0, 1], a weighted sum, times the instance's weight."""

from __future__ import annotations

from agent_reach.registry.index import Instance
from agent_reach.routing.queueing import fleet_in_flight

HEALTH_FACTOR = {"healthy": 1.0, "suspect": 0.5, "offline": 0.0}  # suspect: routable, scored down
LATENCY_REF_MS = 100.0  # a p50 of 100 ms halves the latency factor; 0 ms gives 1


def factors_of(instance: Instance, *, match: float, is_warm: bool) -> dict[str, float]:
    """Every factor of one instance; an instance with no calls yet gets the benefit of doubt."""
    window = instance.stats
    rate = window.success_rate
    p50 = window.latency_ms(0.5)
    return {
        "match": match,
        "health": HEALTH_FACTOR[instance.health],
        "affinity": 1.0 if is_warm else 0.0,
        "load": max(0.0, 1.0 - fleet_in_flight(instance) / instance.spec.capacity),
        "success": 1.0 if rate is None else rate,
        "latency": 1.0 if p50 is None else LATENCY_REF_MS / (LATENCY_REF_MS + p50),
    }


def weighted_score(
    factors: dict[str, float], weights: tuple[tuple[str, float], ...], weight: float
) -> float:
    """Σ weight_f × factor_f, scaled by the instance's own weight."""
    total = 0.0
    for name, w in weights:
        total += w * factors[name]
    return weight * total
