"""The registry service over the memory store, with a manual clock."""

from __future__ import annotations

import asyncio

import pytest

from agent_reach.backends.memory.registry import MemoryRegistryStore
from agent_reach.backends.protocols import OFFLINE_RETENTION_S, InstanceRecord, LeasedRecord
from agent_reach.clock import ManualClock
from agent_reach.errors import UnknownAgent
from agent_reach.model.agents import AgentSpec
from agent_reach.registry.service import Registry


def spec(agent_id: str = "a-1", ttl: float = 10.0) -> AgentSpec:
    return AgentSpec(
        id=agent_id,
        capabilities=["x"],
        ttl=ttl,
        transport={"endpoint": "http://127.0.0.1:1/invoke"},
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def registry(clock: ManualClock) -> Registry:
    return Registry(MemoryRegistryStore(clock), clock, node_id="n1")


async def test_lease_runs_out_without_heartbeats_and_the_instance_leaves_at_once(registry, clock):
    await registry.register(spec(ttl=10))
    clock.advance(9.9)
    assert registry.capabilities() == {"x": ["a-1"]}
    clock.advance(0.2)
    assert registry.capabilities() == {"x": []}
    assert registry.get("a-1").status == "offline"
    with pytest.raises(UnknownAgent):
        await registry.heartbeat("a-1")


async def test_heartbeat_extends_the_lease_by_its_ttl(registry, clock):
    await registry.register(spec(ttl=10))
    clock.advance(8)
    assert await registry.heartbeat("a-1") == 10
    clock.advance(8)
    assert registry.get("a-1").status == "unknown"  # leased; no probe has answered here
    assert registry.get("a-1").lease_expires_in_s == pytest.approx(2.0)


async def test_offline_records_are_forgotten_after_the_retention(registry, clock):
    await registry.register(spec(ttl=10))
    clock.advance(10 + OFFLINE_RETENTION_S + 1)
    await registry.resync()
    assert registry.views() == []


async def test_deregister_twice_is_unknown(registry):
    await registry.register(spec())
    await registry.deregister("a-1")
    with pytest.raises(UnknownAgent):
        await registry.deregister("a-1")


class _SharedStore(MemoryRegistryStore):
    """The memory store as if other coordinators wrote to it too: counts full reads, and
    can hold a version read's answer back once it is read (a read that began earlier)."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.loads = 0
        self.version_reads = 0
        self.hold: asyncio.Event | None = None
        self.holding = asyncio.Event()  # set while a version read's answer is held back

    async def load(self) -> list[LeasedRecord]:
        self.loads += 1
        return await super().load()

    async def version(self) -> int:
        self.version_reads += 1
        version = await super().version()
        if self.hold is not None:
            hold, self.hold = self.hold, None
            self.holding.set()
            await hold.wait()
        return version


def _record(agent_id: str) -> InstanceRecord:
    return InstanceRecord(spec=spec(agent_id), registered_at=0.0)


async def test_catch_ups_with_nothing_stored_since_read_only_the_version(clock):
    store = _SharedStore(clock)
    registry = Registry(store, clock, node_id="n1", shared=True)
    await registry.resync()
    loads = store.loads

    await asyncio.gather(*(registry.catch_up() for _ in range(50)))
    for _ in range(50):
        await registry.catch_up()

    assert store.loads == loads  # the registry itself was not read again
    assert store.version_reads > 50

    await store.put(_record("elsewhere-1"), "n2")  # another coordinator's registration
    await registry.catch_up()
    assert store.loads == loads + 1
    assert "elsewhere-1" in registry.index.by_id


async def test_a_catch_up_waits_for_a_read_that_began_after_it(clock):
    store = _SharedStore(clock)
    registry = Registry(store, clock, node_id="n1", shared=True)
    await registry.resync()
    gate = store.hold = asyncio.Event()
    early = asyncio.ensure_future(registry.catch_up())
    await asyncio.wait_for(store.holding.wait(), 10)  # the early read has read the version
    await store.put(_record("elsewhere-2"), "n2")  # acknowledged after that read began
    late = asyncio.ensure_future(registry.catch_up())  # a request that came after the write
    await asyncio.sleep(0)

    gate.set()
    await early
    assert "elsewhere-2" not in registry.index.by_id  # the early read saw the old version
    await late
    assert "elsewhere-2" in registry.index.by_id
