"""The `WhyStore` contract, sentence by sentence, on the shared backends (memory has none:
one coordinator's journal is all there is to read)."""

from __future__ import annotations

import pytest
from contract_kit import Timeline

from agent_reach.backends.bundle import Backends
from agent_reach.backends.protocols import WhyStore

CAP = 3


@pytest.fixture
def why(backends: Backends) -> WhyStore:
    if backends.why is None:
        assert not backends.is_shared  # a shared backend must share the why records
        pytest.skip("not a shared backend: no WhyStore")
    return backends.why


async def test_records_come_back_per_request_oldest_first(why: WhyStore) -> None:
    await why.add([("req-1", b"a1"), ("req-2", "答".encode()), ("req-1", b"\x00\xff")], CAP, 60)
    await why.add([("req-1", b"a3")], CAP, 60)

    assert await why.get("req-1") == [b"a1", b"\x00\xff", b"a3"]
    assert await why.get("req-2") == ["答".encode()]
    assert await why.get("never-written") == []


async def test_a_request_keeps_only_its_newest_records_past_the_cap(why: WhyStore) -> None:
    await why.add([("req-cap", f"r{n}".encode()) for n in range(5)], CAP, 60)

    assert await why.get("req-cap") == [b"r2", b"r3", b"r4"]


async def test_records_expire_after_the_last_write(why: WhyStore, timeline: Timeline) -> None:
    await why.add([("req-ttl", b"first")], CAP, 0.3)
    await why.add([("req-ttl", b"second")], CAP, 0.3)

    async def gone() -> bool:
        return await why.get("req-ttl") == []

    await timeline.wait_out(0.3, gone, failure="the why records did not expire")


async def test_an_empty_batch_writes_nothing(why: WhyStore) -> None:
    await why.add([], CAP, 60)
    assert await why.get("req-none") == []
