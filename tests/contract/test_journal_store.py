"""The `JournalStore` contract, sentence by sentence, on every backend."""

from __future__ import annotations

import pytest

from agent_reach.backends.bundle import Backends
from agent_reach.backends.protocols import JournalStore

CAP = 4


@pytest.fixture
def journal(backends: Backends) -> JournalStore:
    return backends.journal


async def test_recent_returns_entries_newest_first_up_to_limit(journal: JournalStore) -> None:
    payloads = [b'{"n": 1}', "死信".encode(), b"\x00\xff"]
    for payload in payloads:
        await journal.append("dead-letters", payload, CAP)

    assert await journal.recent("dead-letters", 10) == payloads[::-1]
    assert await journal.recent("dead-letters", 2) == payloads[:0:-1]
    assert await journal.recent("dead-letters", 0) == []
    assert await journal.count("dead-letters") == 3


async def test_appending_past_the_cap_drops_the_oldest_entries(journal: JournalStore) -> None:
    for n in range(10):
        await journal.append("dead-letters", f"entry-{n}".encode(), CAP)

    assert await journal.count("dead-letters") == CAP
    assert await journal.recent("dead-letters", 10) == [f"entry-{n}".encode() for n in (9, 8, 7, 6)]


async def test_an_unknown_journal_is_empty(journal: JournalStore) -> None:
    assert await journal.count("never-written") == 0
    assert await journal.recent("never-written", 10) == []


async def test_journals_are_independent(journal: JournalStore) -> None:
    await journal.append("dead-letters", b"a", CAP)
    await journal.append("audit", b"b", CAP)

    assert await journal.recent("dead-letters", 10) == [b"a"]
    assert await journal.recent("audit", 10) == [b"b"]
