"""Fleet-wide queue depth of an instance, and the down-weight past its `max_queue`.

The original system: "when order-service has more than 100 waiting, lower its weight
and divert". Waiting here is in flight on every coordinator together (this one's own
count plus what the others last published, `registry/fleet_load.py`).
"""

from __future__ import annotations

from agent_reach.registry.index import Instance

# Past its max_queue an instance keeps a tenth of its score: any instance of the same
# capability under its own limit wins, and when all are past theirs, the load still ranks.
OVER_QUEUE_SCALE = 0.1


def fleet_in_flight(instance: Instance) -> int:
    """Requests the instance holds from every coordinator."""
    window = instance.stats
    return window.in_flight + window.remote_in_flight


def queue_scale(instance: Instance, default_max_queue: int) -> float:
    """1 within the instance's max_queue (its own, else the policy's), else the down-weight."""
    limit = instance.spec.max_queue or default_max_queue
    return 1.0 if fleet_in_flight(instance) <= limit else OVER_QUEUE_SCALE
