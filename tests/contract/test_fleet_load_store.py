"""FleetLoadStore contract, on every backend: each node sees the others' fresh counts."""

from __future__ import annotations

from contract_kit import Timeline

from agent_reach.backends.bundle import Backends

STALE_S = 0.5


async def test_a_node_sees_the_sum_of_the_other_nodes_counts_but_not_its_own(backends: Backends):
    load = backends.fleet_load
    assert await load.exchange("node-a", {"slow-1": 3, "fast-1": 1}, STALE_S) == {}
    assert await load.exchange("node-b", {"slow-1": 2}, STALE_S) == {"slow-1": 3, "fast-1": 1}
    assert await load.exchange("node-c", {}, STALE_S) == {"slow-1": 5, "fast-1": 1}
    # A new publication replaces the node's previous counts.
    assert await load.exchange("node-a", {"fast-1": 4}, STALE_S) == {"slow-1": 2}
    assert await load.exchange("node-c", {}, STALE_S) == {"slow-1": 2, "fast-1": 4}


async def test_a_node_that_stops_publishing_drops_out(backends: Backends, timeline: Timeline):
    load = backends.fleet_load
    await load.exchange("gone", {"slow-1": 7}, STALE_S)

    async def forgotten() -> bool:
        return await load.exchange("alive", {}, STALE_S) == {}

    await timeline.wait_out(STALE_S + 0.05, forgotten, failure="a stale node still counts")
