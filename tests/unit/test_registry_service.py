"""The registry service over the memory store, with a manual clock."""

from __future__ import annotations

import pytest

from agent_reach.backends.memory.registry import MemoryRegistryStore
from agent_reach.backends.protocols import OFFLINE_RETENTION_S
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
    assert registry.get("a-1").status == "healthy"
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
