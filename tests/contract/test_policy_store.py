"""The `PolicyStore` contract, sentence by sentence, on every backend."""

from __future__ import annotations

import asyncio

import pytest

from agent_reach.backends.bundle import Backends
from agent_reach.backends.protocols import PolicyChange, PolicyStore


@pytest.fixture
def policies(backends: Backends) -> PolicyStore:
    return backends.policy


def _change(by: str = "admin", source: str = "api", at: float = 1.5) -> PolicyChange:
    return PolicyChange(0, at, by, source, None, "")


async def test_an_empty_store_holds_no_policy_and_no_changes(policies: PolicyStore) -> None:
    assert await policies.get() is None
    assert await policies.changes(10) == []


async def test_each_replace_is_the_next_revision_with_its_audit_record(
    policies: PolicyStore,
) -> None:
    first = await policies.replace(b'{"margin": 0.1}', "v1", change=_change("file:p", "file"))
    second = await policies.replace(b'{"margin": 0.2}', "v2", change=_change("ops", at=2.5))

    assert first == PolicyChange(1, 1.5, "file:p", "file", None, "v1")
    assert second == PolicyChange(2, 2.5, "ops", "api", "v1", "v2")
    stored = await policies.get()
    assert stored is not None
    assert (stored.revision, stored.version, stored.document) == (2, "v2", b'{"margin": 0.2}')
    assert await policies.changes(10) == [second, first]
    assert await policies.changes(1) == [second]


async def test_a_stale_expected_revision_writes_nothing(policies: PolicyStore) -> None:
    assert await policies.replace(b"{}", "v1", change=_change(), expected_revision=0)
    assert await policies.replace(b"{}", "v2", change=_change(), expected_revision=0) is None
    assert await policies.replace(b"{}", "v2", change=_change(), expected_revision=5) is None

    stored = await policies.get()
    assert stored is not None and (stored.revision, stored.version) == (1, "v1")
    assert len(await policies.changes(10)) == 1


async def test_file_content_already_taken_is_not_applied_again(policies: PolicyStore) -> None:
    assert await policies.replace(b"{}", "v1", change=_change(), file_digest="d1")
    assert await policies.replace(b"{}", "v2", change=_change())  # a run-time change
    again = await policies.replace(b"{}", "v1", change=_change(), file_digest="d1")

    assert again is None
    stored = await policies.get()
    assert stored is not None and (stored.version, stored.file_digest) == ("v2", "d1")
    assert await policies.replace(b"{}", "v3", change=_change(), file_digest="d2")


async def test_concurrent_writers_on_one_revision_have_exactly_one_winner(
    policies: PolicyStore,
) -> None:
    results = await asyncio.gather(
        *(
            policies.replace(b"{}", f"v{n}", change=_change(f"w{n}"), expected_revision=0)
            for n in range(8)
        )
    )
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    assert [c.by for c in await policies.changes(10)] == [winners[0].by]
