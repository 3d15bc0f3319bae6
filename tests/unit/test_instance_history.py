"""The per-instance history `why` reads: a snapshot only on change, bounded, looked up by time."""

from __future__ import annotations

from agent_reach.backends.protocols import InstanceRecord
from agent_reach.clock import ManualClock
from agent_reach.model.agents import AgentSpec
from agent_reach.registry.history import HISTORY_LENGTH, InstanceHistory
from agent_reach.registry.index import RegistryIndex


def indexed(clock: ManualClock, agent_id: str = "a-1") -> tuple[RegistryIndex, InstanceHistory]:
    index = RegistryIndex()
    spec = AgentSpec(
        id=agent_id, capabilities=["cap.one"], transport={"endpoint": "http://127.0.0.1:1/x"}
    )
    index.upsert(InstanceRecord(spec, clock.wall()), clock.monotonic() + 30).health = "healthy"
    return index, InstanceHistory(index, clock)


def test_an_unchanged_instance_adds_no_snapshot_and_a_change_does():
    clock = ManualClock()
    index, history = indexed(clock)
    history.sample()
    clock.advance(1)
    history.sample()
    first = history.at("a-1", clock.wall())
    assert first is not None and first.time == clock.wall() - 1

    index.by_id["a-1"].health = "suspect"
    clock.advance(1)
    history.sample()
    assert history.at("a-1", clock.wall() - 0.5).health == "healthy"
    assert history.at("a-1", clock.wall()).health == "suspect"


def test_the_state_at_a_time_before_any_sample_is_the_first_one():
    clock = ManualClock()
    _, history = indexed(clock)
    history.sample()
    snapshot = history.at("a-1", clock.wall() - 100)
    assert snapshot is not None and snapshot.time == clock.wall()
    assert history.at("never-seen", clock.wall()) is None


def test_an_instance_not_sampled_yet_is_sampled_when_asked_for():
    # registered less than a sampling interval before a request: `why` still shows it
    clock = ManualClock()
    index, history = indexed(clock)
    index.by_id["a-1"].stats.in_flight = 2
    asked = history.at("a-1", clock.wall() - 0.1)
    assert asked is not None and asked.registered and asked.in_flight == 2
    assert asked.context_fields == () and asked.time == clock.wall()
    clock.advance(1)
    history.sample()  # unchanged since: no second snapshot
    assert history.at("a-1", clock.wall()) == asked


def test_the_history_keeps_the_last_snapshots_only_and_remembers_a_deregistration():
    clock = ManualClock()
    index, history = indexed(clock)
    window = index.by_id["a-1"].stats
    for n in range(HISTORY_LENGTH * 3):
        window.in_flight = n
        clock.advance(0.5)
        history.sample()
    oldest = history.at("a-1", 0)
    assert oldest is not None and oldest.time == clock.wall() - (HISTORY_LENGTH - 1) * 0.5

    index.remove("a-1")
    clock.advance(0.5)
    history.sample()
    gone = history.at("a-1", clock.wall())
    assert gone is not None and not gone.registered and gone.health == "offline"
