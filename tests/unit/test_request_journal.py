"""RequestJournal on plain data: entries made when asked for, bounded by count and bytes."""

from __future__ import annotations

import pytest

from agent_reach.clock import ManualClock
from agent_reach.model.keys import Principal
from agent_reach.troubleshooting import journal as journal_module
from agent_reach.troubleshooting.journal import RequestJournal
from agent_reach.wire.answer import Answer

ALICE = Principal("k-1", "alice", None, "caller")
BOB = Principal("k-2", "bob", None, "caller")


def test_an_entry_says_who_when_how_long_and_the_answer_as_sent() -> None:
    clock = ManualClock()
    journal = RequestJournal(clock, node_id="coord-a")
    started = clock.monotonic()
    clock.advance(0.0125)
    answer = Answer.of(200, {"status": "ok", "result": 1})

    journal.record("r-1", ALICE, "t" * 32, "ctx-1", answer, started)

    [entry] = journal.find("r-1")
    assert (entry.request_id, entry.principal, entry.trace_id) == ("r-1", "alice", "t" * 32)
    assert (entry.context_id, entry.node, entry.answer) == ("ctx-1", "coord-a", answer)
    assert entry.duration_ms == 12.5
    assert entry.time == clock.wall() - 0.0125  # when the request began
    assert entry.body() == {"status": "ok", "result": 1}


def test_one_id_used_by_two_principals_gives_both_entries_oldest_first() -> None:
    clock = ManualClock()
    journal = RequestJournal(clock)
    journal.record("r-1", ALICE, "a" * 32, None, Answer.of(200, 1), clock.monotonic())
    journal.record("r-2", ALICE, "c" * 32, None, Answer.of(200, 3), clock.monotonic())
    journal.record("r-1", BOB, "b" * 32, None, Answer.of(200, 2), clock.monotonic())

    assert [e.principal for e in journal.find("r-1")] == ["alice", "bob"]
    assert journal.find("r-3") == []


def test_the_oldest_answers_go_first_past_the_count() -> None:
    clock = ManualClock()
    journal = RequestJournal(clock, size=3)
    for n in range(5):
        journal.record(f"r-{n}", ALICE, "t" * 32, None, Answer.of(200, n), clock.monotonic())

    assert [bool(journal.find(f"r-{n}")) for n in range(5)] == [False, False, True, True, True]
    assert journal.bytes_held == sum(len(Answer.of(200, n).body) for n in (2, 3, 4))


def test_the_oldest_answers_go_first_past_the_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock()
    journal = RequestJournal(clock)
    body = Answer(200, b"x" * 400)
    monkeypatch.setattr(journal_module, "MAX_BYTES", 1_000)
    for n in range(4):
        journal.record(f"r-{n}", ALICE, "t" * 32, None, body, clock.monotonic())

    assert [bool(journal.find(f"r-{n}")) for n in range(4)] == [False, False, True, True]
    assert journal.bytes_held == 800
