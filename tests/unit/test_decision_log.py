"""The decision log's file target: batched JSON lines, size rotation, nothing lost at close."""

from __future__ import annotations

import asyncio
import threading

import orjson

from agent_reach.clock import ManualClock
from agent_reach.model.decisions import Candidate, RouteDecision
from agent_reach.observability.decision_log import DecisionLog

GATE_S = 10.0  # a gate nobody opens fails the test instead of hanging it


def decision(n: int) -> RouteDecision:
    candidate = Candidate("echo", f"a-{n}", 0.8, {"health": 1.0}, {"exact": 1.0})
    return RouteDecision("echo", f"a-{n}", "exact", [candidate], None, "v1", {"health": 1.0})


async def test_every_decision_reaches_the_file_in_order_even_when_closed_mid_flush(tmp_path):
    path = tmp_path / "decisions.jsonl"
    log = DecisionLog(str(path), ManualClock())
    sink = log._sink
    assert sink is not None
    write, batches = sink.write, []
    flushing, release = threading.Event(), threading.Event()

    def held_write(batch: list[bytes]) -> None:  # the flush's thread waits at this gate
        batches.append(len(batch))
        flushing.set()
        assert release.wait(GATE_S), "the test never let the flush finish"
        write(batch)

    sink.write = held_write  # type: ignore[method-assign]
    writer = asyncio.create_task(log.run())
    for n in range(500):
        log.record(decision(n), kind="invoke", request_id=f"r-{n}", trace_id="t" * 32)
    assert await asyncio.to_thread(flushing.wait, GATE_S), "no flush started"
    sink.write = write  # type: ignore[method-assign]  # the close's own write is not held
    for n in range(500, 600):
        log.record(decision(n), kind="invoke", request_id=f"r-{n}", trace_id="t" * 32)
    writer.cancel()
    closing = asyncio.create_task(log.aclose())
    await asyncio.sleep(0)  # the close starts ...
    await asyncio.sleep(0)
    assert not closing.done()  # ... and waits for the flush it interrupted
    release.set()
    await closing
    assert batches == [500]  # the flush held the first 500; the close wrote the rest
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert [line["request_id"] for line in lines] == [f"r-{n}" for n in range(600)]
    assert lines[0]["candidates"][0]["factors"] == {"health": 1.0}


async def test_a_full_file_is_rotated_and_backups_are_capped(tmp_path):
    path = tmp_path / "decisions.jsonl"
    for round_ in range(6):
        log = DecisionLog(str(path), ManualClock(), max_bytes=2_000, backups=2)
        for n in range(5):
            log.record(decision(n), kind="route", request_id=f"{round_}-{n}", trace_id="t" * 32)
        await log.aclose()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["decisions.jsonl", "decisions.jsonl.1", "decisions.jsonl.2"]
    assert all(p.stat().st_size <= 2_000 for p in tmp_path.iterdir())


def test_recent_decisions_are_kept_even_when_the_log_is_off():
    log = DecisionLog("off", ManualClock())
    log.record(decision(1), kind="route", request_id="r-1", trace_id="a" * 32)
    log.record(decision(2), kind="route", request_id="r-2", trace_id="b" * 32)
    assert [d.request_id for d in log.recent(10)] == ["r-2", "r-1"]
    assert [d.request_id for d in log.recent(10, agent_id="a-1")] == ["r-1"]
    assert not log.is_on


async def test_the_recent_decisions_read_back_as_recorded_and_as_written(tmp_path):
    path = tmp_path / "decisions.jsonl"
    clock = ManualClock()
    log = DecisionLog(str(path), clock)
    for n, who in enumerate(["alice", "bob", "alice", None]):
        clock.advance(1)
        log.record(
            decision(n), kind="invoke", request_id=f"r-{n}", trace_id=f"{n}" * 32, principal=who
        )
    await log.aclose()

    [newest, older] = log.recent(10, principal="alice")
    assert (newest.request_id, newest.trace_id, newest.kind) == ("r-2", "2" * 32, "invoke")
    assert (newest.principal, newest.decision, newest.time) == (
        "alice",
        decision(2),
        clock.wall() - 1,
    )
    assert older.request_id == "r-0"
    assert [e.request_id for e in log.recent(2)] == ["r-3", "r-2"]
    assert [e.request_id for e in log.recent(10, trace_id="1" * 32)] == ["r-1"]
    assert [e.request_id for e in log.recent(10, agent_id="a-3")] == ["r-3"]
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert lines[2] == {
        "time": clock.wall() - 1,
        "kind": "invoke",
        "principal": "alice",
        "request_id": "r-2",
        "trace_id": "2" * 32,
        "capability": "echo",
        "agent_id": "a-2",
        "rule": "exact",
        "refused_by": None,
        "margin": None,
        "policy_version": "v1",
        "candidates": [
            {
                "capability": "echo",
                "agent_id": "a-2",
                "score": 0.8,
                "factors": {"health": 1.0},
                "match": {"exact": 1.0},
                "outcomes": {},
                "offer": None,
            }
        ],
    }
