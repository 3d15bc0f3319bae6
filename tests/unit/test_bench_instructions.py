"""bench/instructions.py: callgrind's count read back, a request's share of it, the child run."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "bench" / "instructions.py"

VALGRIND_END = """\
==4711== Events    : Ir
==4711== Collected : 7897567957
==4711==
==4711== I   refs:      7,897,567,957
"""


def test_the_count_is_read_from_callgrinds_last_lines(bench):
    assert bench.collected("noise\n" + VALGRIND_END) == 7_897_567_957


def test_a_run_without_a_count_is_an_error_not_a_zero(bench):
    with pytest.raises(RuntimeError, match="no count"):
        bench.collected("==4711== Memcheck, a memory error detector\n")


def test_a_request_costs_the_difference_over_the_requests(bench):
    assert bench.per_request(7_897_567_957, 7_310_324_839, 1280) == pytest.approx(458_783.7, 0.1)
    with pytest.raises(ValueError):
        bench.per_request(100, 200, 10)
    with pytest.raises(ValueError):
        bench.per_request(200, 100, 0)


def test_the_child_warms_up_then_invokes_with_its_variant_switched_off(bench):
    # Without valgrind: the run callgrind counts, made for real, decisions counted.
    from agent_reach.observability.decision_log import DecisionLog

    record = DecisionLog.record
    decided: list[str] = []

    def counted(self, decision, **kwargs):
        decided.append(kwargs["request_id"])
        record(self, decision, **kwargs)

    # one invoke checks the registration, then the warm-up runs (recording is imported by the bench)
    warmups = 1 + bench.WARMUP * sys.modules["recording"].WARMUP_RUNS
    with bench.replaced(((DecisionLog, "record", counted),)):
        bench.child(64, bench.EVERYTHING_ON)
        assert len(decided) == warmups + 64
        decided.clear()
        bench.child(64, "decision log")  # off for the measured invokes only
        assert len(decided) == warmups


def test_bytecodes_are_counted_in_the_loop_thread_for_the_measured_requests_only(bench):
    from agent_reach.server.fastpath import answer_invoke

    recording = sys.modules["recording"]
    runner = recording._runner
    counts = bench.trace_bytecodes(64)
    assert recording._runner is runner  # restored
    entered = {code.co_qualname: n for code, n in counts.entered.items()}
    # each request enters the fast path once and resumes it at least once, after its delivery
    assert entered["answer_invoke"] >= 2 * 64
    assert counts.executed[answer_invoke.__code__] > 64 * 100


def test_the_loops_other_tasks_are_counted_apart_from_the_requests(bench):
    counts = bench.Bytecodes()

    def flush() -> int:
        return sum(range(3))

    def serve() -> int:
        return sum(range(5))

    async def background() -> None:
        while True:
            flush()
            await asyncio.sleep(0)

    async def request() -> None:
        for _ in range(3):
            serve()
            await asyncio.sleep(0)

    async def run() -> None:
        task = asyncio.create_task(background())  # started before the requests' context
        await asyncio.sleep(0)
        bench._MEASURED.set(True)
        sys.settrace(counts._entered)
        try:
            await asyncio.gather(request(), request())
        finally:
            sys.settrace(None)
        task.cancel()

    asyncio.run(run())
    assert counts.entered[serve.__code__] == 6
    assert counts.executed[serve.__code__] > 0
    assert flush.__code__ not in counts.executed and flush.__code__ not in counts.entered
    assert counts.background[flush.__code__] > 0


def test_requests_that_the_callers_cannot_share_evenly_are_refused():
    done = subprocess.run(
        [sys.executable, str(BENCH), "--requests", "100"], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "--requests must be a positive multiple of 64" in done.stderr
