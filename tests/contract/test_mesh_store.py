"""The `MeshStore` contract on every backend: the kill switch's set and chain budgets."""

from __future__ import annotations

import asyncio

from contract_kit import Timeline

from agent_reach.backends.bundle import Backends

TTL_S = 0.3


async def test_disabling_and_enabling_is_seen_with_its_record(backends: Backends) -> None:
    mesh = backends.mesh
    assert await mesh.disabled() == {}
    assert await mesh.set_disabled("order-1", b'{"by": "ops"}') is True
    assert await mesh.set_disabled("order-1", b'{"by": "ops", "again": true}') is False
    assert await mesh.set_disabled("faq-1", b"{}") is True
    assert await mesh.disabled() == {"order-1": b'{"by": "ops", "again": true}', "faq-1": b"{}"}
    assert await mesh.set_disabled("order-1", None) is True
    assert await mesh.set_disabled("order-1", None) is False
    assert await mesh.disabled() == {"faq-1": b"{}"}


async def test_a_chain_spends_up_to_its_limit_and_no_further(backends: Backends) -> None:
    mesh = backends.mesh
    assert await mesh.spend("root-1", 4.0, 10.0, 60) == 4.0
    assert await mesh.spend("root-1", 5.5, 10.0, 60) == 9.5
    assert await mesh.spend("root-1", 1.0, 10.0, 60) is None  # 10.5 would pass the limit
    assert await mesh.spend("root-1", 0.5, 10.0, 60) == 10.0
    assert await mesh.spend("root-2", 10.0, 10.0, 60) == 10.0  # chains are apart


async def test_concurrent_spends_never_pass_the_limit(backends: Backends) -> None:
    results = await asyncio.gather(*(backends.mesh.spend("race", 1.0, 5.0, 60) for _ in range(20)))
    assert sorted(r for r in results if r is not None) == [1.0, 2.0, 3.0, 4.0, 5.0]


async def test_a_chains_total_expires_after_its_last_spend(
    backends: Backends, timeline: Timeline
) -> None:
    assert await backends.mesh.spend("short", 3.0, 3.0, TTL_S) == 3.0
    await timeline.elapse(TTL_S + 0.1)
    assert await backends.mesh.spend("short", 3.0, 3.0, TTL_S) == 3.0
