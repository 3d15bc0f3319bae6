"""FleetWatcher on plain data: feed events from registry changes, scale events below minimum."""

from __future__ import annotations

from agent_reach.backends.memory.idempotency import MemoryIdempotencyStore
from agent_reach.backends.protocols import InstanceRecord
from agent_reach.clock import ManualClock
from agent_reach.model.agents import AgentSpec, TransportSpec
from agent_reach.observability.events import EventFeed
from agent_reach.policy.policy import Policy
from agent_reach.policy.source import PolicySource
from agent_reach.registry.index import RegistryIndex
from agent_reach.registry.scale import FleetWatcher

LEASE_S = 10.0


def _record(agent_id: str, *, min_instances: int = 0, at: float = 1.0) -> InstanceRecord:
    spec = AgentSpec(
        id=agent_id,
        capabilities=["docs.search"],
        transport=TransportSpec(endpoint=f"http://127.0.0.1:9000/{agent_id}"),
        min_instances=min_instances,
    )
    return InstanceRecord(spec=spec, registered_at=at)


def _watcher(index: RegistryIndex, clock: ManualClock) -> tuple[FleetWatcher, EventFeed]:
    feed = EventFeed(clock)
    watcher = FleetWatcher(
        index, clock, feed, PolicySource(clock), MemoryIdempotencyStore(clock, 1 << 20)
    )
    return watcher, feed


def _published(feed: EventFeed, watcher: FleetWatcher) -> list[tuple[str, dict[str, object]]]:
    with feed.subscribe() as queue:
        watcher.look()
        events = []
        while not queue.empty():
            event = queue.get_nowait()
            events.append((event.kind, event.data))
    return events


def test_registration_health_change_and_removal_become_feed_events() -> None:
    clock, index = ManualClock(), RegistryIndex()
    watcher, feed = _watcher(index, clock)
    index.upsert(_record("a-1"), clock.monotonic() + LEASE_S).health = "healthy"

    assert [k for k, _ in _published(feed, watcher)] == ["registration"]
    index.by_id["a-1"].health = "suspect"
    assert _published(feed, watcher) == [
        ("health", {"agent_id": "a-1", "from": "healthy", "to": "suspect"})
    ]
    assert _published(feed, watcher) == []  # nothing changed
    index.remove("a-1")
    assert _published(feed, watcher) == [("deregistration", {"agent_id": "a-1"})]


def test_losing_an_instance_below_min_instances_raises_one_scale_event_with_its_spec() -> None:
    clock, index = ManualClock(), RegistryIndex()
    watcher, _ = _watcher(index, clock)
    for agent_id in ("a-1", "a-2"):
        index.upsert(
            _record(agent_id, min_instances=2), clock.monotonic() + LEASE_S
        ).health = "healthy"
    assert watcher.look() == []

    index.by_id["a-2"].health = "offline"
    [event] = watcher.look()

    assert (event.capability, event.min_instances, event.instances_left) == ("docs.search", 2, 1)
    assert event.lost_agent_id == "a-2" and event.last_spec["id"] == "a-2"
    assert watcher.look() == []  # the same loss is not raised again


def test_an_expired_lease_counts_as_a_loss() -> None:
    clock, index = ManualClock(), RegistryIndex()
    watcher, _ = _watcher(index, clock)
    index.upsert(_record("a-1", min_instances=1), clock.monotonic() + LEASE_S).health = "healthy"
    watcher.look()

    clock.advance(LEASE_S + 1)
    [event] = watcher.look()

    assert (event.lost_agent_id, event.lost_status, event.instances_left) == ("a-1", "offline", 0)


def test_no_minimum_means_no_scale_event() -> None:
    clock, index = ManualClock(), RegistryIndex()
    watcher, _ = _watcher(index, clock)
    index.upsert(_record("a-1"), clock.monotonic() + LEASE_S).health = "healthy"
    watcher.look()

    index.by_id["a-1"].health = "offline"

    assert watcher.look() == []


def test_the_event_id_names_the_lost_registration_so_coordinators_agree_on_it() -> None:
    events = []
    for _ in range(2):  # two coordinators, each with its own index of the same records
        clock, index = ManualClock(), RegistryIndex()
        watcher, _ = _watcher(index, clock)
        index.upsert(
            _record("a-1", min_instances=1, at=1234.5), clock.monotonic() + LEASE_S
        ).health = "healthy"
        watcher.look()
        index.by_id["a-1"].health = "suspect"
        events += watcher.look()

    assert len({e.event_id for e in events}) == 1


def test_a_minimum_declared_in_the_policy_raises_the_scale_event_too() -> None:
    clock, index = ManualClock(), RegistryIndex()
    feed = EventFeed(clock)
    policy = PolicySource(clock)
    policy.current = Policy(min_instances={"docs.search": 2})
    watcher = FleetWatcher(index, clock, feed, policy, MemoryIdempotencyStore(clock, 1 << 20))
    for agent_id in ("a-1", "a-2"):
        index.upsert(
            _record(agent_id, min_instances=1), clock.monotonic() + LEASE_S
        ).health = "healthy"
    watcher.look()

    index.by_id["a-2"].health = "offline"
    [event] = watcher.look()  # 1 healthy: enough for the registrations, not for the policy

    assert (event.capability, event.min_instances, event.instances_left) == ("docs.search", 2, 1)
