"""Instance scoring: each factor in [0, 1], a weighted mean, times the instance's weight.

The weights are relative: the sum is divided by their total (the presets' add up to
1.30), so an instance of `weight` 1 scores in [0, 1]; its `weight` multiplies that
(2 doubles it, 0.5 halves it).

Past its `max_queue` an instance is scored down. The original system: "when
order-service has more than 100 waiting, lower its weight and divert". Waiting here is
in flight on every coordinator together (this one's own count plus what the others
last published, `registry/fleet_load.py`).

An instance no probe or delivery has answered yet (`unknown`, just registered) is
scored down the same way: any instance that has answered wins, but alone it is still
tried (a request is not refused because its agent registered a moment ago).
"""

from __future__ import annotations

from agent_reach.registry.index import Instance

# suspect and unknown: routable, scored down
HEALTH_FACTOR = {"healthy": 1.0, "unknown": 0.5, "suspect": 0.5, "offline": 0.0}
LATENCY_REF_MS = 100.0  # a p50 of 100 ms halves the latency factor; 0 ms gives 1
# Past its max_queue (its own, else the policy's) an instance keeps a tenth of its score:
# any instance of the same capability under its own limit wins, and when all are past
# theirs, the load still ranks.
OVER_QUEUE_SCALE = 0.1
UNKNOWN_SCALE = 0.1  # not yet answered: below every instance that has, ranked as the rest


def score_of(
    instance: Instance,
    *,
    match: float,
    is_warm: bool,
    weights: tuple[tuple[str, float], ...],
    default_max_queue: int,
) -> tuple[float, dict[str, float]]:
    """The instance's score and every factor of it; an instance with no calls yet gets
    the benefit of doubt.

    The score is Σ weight_f × factor_f / Σ weight_f, scaled by the instance's own weight
    and by the queue down-weight. One function, run for every candidate of every request: it reads
    the instance's parts once each.
    """
    window = instance.stats
    spec = instance.spec
    in_flight = window.in_flight + window.remote_in_flight
    rate = window.success_rate
    p50 = window.latency_ms(0.5)
    factors = {
        "match": match,
        "health": HEALTH_FACTOR[instance.tracker.state],
        "affinity": 1.0 if is_warm else 0.0,
        "load": max(0.0, 1.0 - in_flight / spec.capacity),
        "success": 1.0 if rate is None else rate,
        "latency": 1.0 if p50 is None else LATENCY_REF_MS / (LATENCY_REF_MS + p50),
        "quality": instance.outcomes.quality,
    }
    total = 0.0
    weight_sum = 0.0
    for name, w in weights:
        total += w * factors[name]
        weight_sum += w
    if weight_sum > 0:  # a policy needs one positive weight; adapted ones stay positive too
        total /= weight_sum
    scale = 1.0 if in_flight <= (spec.max_queue or default_max_queue) else OVER_QUEUE_SCALE
    if instance.tracker.state == "unknown":
        scale *= UNKNOWN_SCALE
    return spec.weight * scale * total, factors
