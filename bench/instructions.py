"""Instructions per request on the hot path: a figure that does not drift with the host.

    .venv/bin/python bench/instructions.py [--requests 2560] [--variant NAME]... [--json out.json]

Wall-clock figures on a shared machine drift by tens of per cent within minutes
(`bench/recording.py` pairs its rounds for that reason); the instructions a request
executes do not. This runs the in-process coordinator of `bench/recording.py` (memory
backend, keys, access rules, a quota, the decision log, tracing; the echo agent in its
own process) under valgrind's callgrind, twice: once stopping right after the warm-up,
once going on for `--requests` more invokes, 64 at a time. The difference over the
requests is what one request costs the coordinator's process: its userland (Python,
uvloop, orjson, pydantic-core, libc), not the kernel's share of its syscalls, and
instructions, not cycles (a cache miss costs many). Each `--variant` of
`bench/recording.py` is measured the same way and reported beside it. Work done on a
clock (the decision log's and the answer memory's flushes) weighs more per request here
than in a real run: callgrind slows the process ~50x, so each flush covers fewer requests.

Runs two callgrinds at a time, each a minute or more (Python runs ~50x slower under
it). Needs Debian's valgrind: `apt-get install -y valgrind`.

`--bytecodes` instead traces the same requests in this process (no valgrind): the
bytecodes executed and the Python frames entered or resumed per request, and the
functions and modules that execute the most (`--top`). Counted: what the requests' own
tasks run (and any task they start) and what the loop runs outside any task (the
delivery's protocol callbacks); the loop's background tasks (flushes, sweeps, watchers,
on a clock, so more of them falls in a run on a slower host) are counted apart and
printed beside. With `--check FILE` it is the hot path's budget: the smallest of
`--runs` traces may not exceed the figures committed in FILE by more than
`BUDGET_TOLERANCE`; the test command runs it, so a change that costs the hot path says
so in its own diff (`--write FILE` records new figures).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from agent_reach.invoke.service import InvokeService

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import recording  # noqa: E402
from recording import IN_FLIGHT, VARIANTS, coordinator, replaced  # noqa: E402

WARMUP = 640  # requests per warm-up run: every code path taken and every cache filled
# Runs of one traced process differ by ~0.1 % (how often the requests' coroutines resume
# varies a little): 5 % over the committed figure is a real cost, not the host's noise.
BUDGET_TOLERANCE = 0.05
BUDGET_RUNS = 3
EVERYTHING_ON = "everything on"
_COLLECTED = re.compile(r"^==\d+== Collected : (\d+)$", re.MULTILINE)


def collected(valgrind_output: str) -> int:
    """The instruction count callgrind reports when its program ends."""
    found = _COLLECTED.findall(valgrind_output)
    if len(found) != 1:
        raise RuntimeError(f"callgrind reported no count:\n{valgrind_output[-2000:]}")
    return int(found[0])


def per_request(total: int, baseline: int, requests: int) -> float:
    """Instructions per request: the run with requests less the one without, shared."""
    if requests <= 0 or total < baseline:
        raise ValueError("the run with requests must count more than the one without")
    return (total - baseline) / requests


def count(requests: int, variant: str) -> int:
    """Instructions of one child run under callgrind: warm-up, then `requests` invokes."""
    with tempfile.TemporaryDirectory(prefix="ar-callgrind-") as directory:
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={directory}/out",
            sys.executable,
            __file__,
            "--child",
            str(requests),
            "--child-variant",
            variant,
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
        return collected(done.stderr)


def child(requests: int, variant: str) -> None:
    """Warm up, then make `requests` invokes with `variant`'s replacements."""
    with coordinator(WARMUP) as timed:
        if requests:
            with replaced(VARIANTS.get(variant, ())):
                timed(requests)


_MEASURED: ContextVar[bool] = ContextVar("measured", default=False)


class Bytecodes:
    """Bytecodes executed and frames entered (or resumed), per code object, of the runs
    made while `traced_runs` is in force, in the thread that makes them.

    Counted: the frames the measured requests' tasks run (and any task they start, which
    inherits their context) and the frames the loop runs outside any task (the delivery's
    protocol callbacks). The loop's other tasks (flushes, sweeps, watchers, all on a
    clock) are counted apart, in `background`: how much of them falls in a run depends on
    how fast the host runs it, not on the requests."""

    def __init__(self) -> None:
        self.executed: Counter[CodeType] = Counter()
        self.entered: Counter[CodeType] = Counter()
        self.background: Counter[CodeType] = Counter()
        self.generated: dict[CodeType, str] = {}  # a dataclass's methods -> its class

    def _entered(self, frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        if _MEASURED.get() or asyncio.current_task() is None:
            code = frame.f_code
            if code.co_filename == "<string>" and code not in self.generated:
                owner = frame.f_locals.get("self")
                self.generated[code] = type(owner).__qualname__ if owner is not None else "?"
            self.entered[code] += 1
            return self._executed
        return self._elsewhere

    def _executed(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            self.executed[frame.f_code] += 1
        return self._executed

    def _elsewhere(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            self.background[frame.f_code] += 1
        return self._elsewhere

    @contextlib.contextmanager
    def traced_runs(self) -> Iterator[None]:
        """bench/recording.py's runs traced in the coordinator's loop thread, where they run."""
        runner = recording._runner

        def traced(
            service: InvokeService, key: str, requests: int
        ) -> Callable[[], Coroutine[Any, Any, float]]:
            run = runner(service, key, requests)

            async def traced_run() -> float:
                _MEASURED.set(True)  # this task's context: the callers' tasks copy it
                sys.settrace(self._entered)
                try:
                    return await run()
                finally:
                    sys.settrace(None)

            return traced_run

        recording._runner = traced
        try:
            yield
        finally:
            recording._runner = runner


def trace_bytecodes(requests: int) -> Bytecodes:
    """The bytecodes of `requests` invokes after the warm-up."""
    counts = Bytecodes()
    with coordinator(WARMUP) as timed, counts.traced_runs():
        timed(requests)
    return counts


def per_request_figures(counts: Bytecodes, requests: int) -> dict[str, float]:
    """Bytecodes executed and frames entered or resumed, per request."""
    return {
        "bytecodes": sum(counts.executed.values()) / requests,
        "frames": sum(counts.entered.values()) / requests,
    }


def _where(code: CodeType, generated: dict[CodeType, str]) -> str:
    if code in generated:  # made by dataclasses: say for which class
        return f"{generated[code]}.{code.co_name} (generated)"
    return f"{_module(code)}:{code.co_firstlineno} {code.co_qualname}"


def _module(code: CodeType) -> str:
    """The file a code object comes from, from the package down when it is the project's."""
    path = Path(code.co_filename)
    parts = path.parts
    if "agent_reach" in parts:
        return "/".join(parts[parts.index("agent_reach") + 1 :])
    return path.name


def print_bytecodes(counts: Bytecodes, requests: int, top: int = 15) -> None:
    """The figures per request, the `top` functions and modules by their own bytecodes,
    and what the loop's background tasks ran beside them."""
    figures = per_request_figures(counts, requests)
    print(
        f"{requests} requests: {figures['bytecodes']:,.0f} bytecodes and "
        f"{figures['frames']:,.1f} Python frames entered or resumed per request"
    )
    print("per request, functions (own bytecodes, frames):")
    for code, n in counts.executed.most_common(top):
        frames = counts.entered[code] / requests
        print(f"{n / requests:8,.0f} {frames:6.1f}  {_where(code, counts.generated)}")
    modules: Counter[str] = Counter()
    for code, n in counts.executed.items():
        modules[_module(code)] += n
    print("per request, modules:")
    for module, n in modules.most_common(top):
        print(f"{n / requests:8,.0f}  {module}")
    background = sum(counts.background.values())
    print(
        f"beside them, the loop's background tasks (not in the figures): "
        f"{background / requests:,.0f} bytecodes per request, most in:"
    )
    for code, n in counts.background.most_common(5):
        print(f"{n / requests:8,.0f}  {_where(code, counts.generated)}")


def smallest_of_runs(requests: int, runs: int) -> dict[str, float]:
    """Each figure's smallest value over `runs` traces of `requests` invokes."""
    traced = [per_request_figures(trace_bytecodes(requests), requests) for _ in range(runs)]
    for name in traced[0]:
        print(f"{name} per request, each run: " + ", ".join(f"{run[name]:,.1f}" for run in traced))
    return {name: min(run[name] for run in traced) for name in traced[0]}


def over_budget(figures: dict[str, float], budget: dict[str, float]) -> list[str]:
    """What exceeds its committed figure by more than the tolerance, said with the numbers."""
    return [
        f"{name}: {figures[name]:,.1f} per request > {limit:,.1f} committed "
        f"+ {BUDGET_TOLERANCE:.0%} ({limit * (1 + BUDGET_TOLERANCE):,.1f})"
        for name, limit in budget.items()
        if figures[name] > limit * (1 + BUDGET_TOLERANCE)
    ]


def check_budget(path: Path, requests: int, runs: int) -> int:
    """Exit status 1 when the hot path costs more than the budget in `path` allows."""
    record = json.loads(path.read_text())
    budget = record["per_request"]
    python = ".".join(sys.version.split()[0].split(".")[:2])
    if not record["python"].startswith(f"{python}."):
        # another interpreter compiles other bytecodes: its counts are not comparable
        print(f"hot-path budget recorded on Python {record['python']}, this is {python}: skipped")
        return 0
    figures = smallest_of_runs(requests, runs)
    print(
        f"hot path, smallest of {runs} x {requests} requests: "
        f"{figures['bytecodes']:,.0f} bytecodes (budget {budget['bytecodes']:,.0f}), "
        f"{figures['frames']:,.1f} frames (budget {budget['frames']:,.1f}) per request"
    )
    failures = over_budget(figures, budget)
    for failure in failures:
        print(f"over the hot-path budget: {failure}", file=sys.stderr)
    if failures:
        print(
            f"If the cost is worth it, record it in the same change: "
            f"python bench/instructions.py --bytecodes --write {path}",
            file=sys.stderr,
        )
    return 1 if failures else 0


def write_budget(path: Path, requests: int, runs: int) -> None:
    figures = smallest_of_runs(requests, runs)
    record = {
        "what": (
            "bench/instructions.py --bytecodes: per /v1/invoke, what the requests' tasks and "
            "the loop's callbacks run (its background tasks apart); the smallest of the runs"
        ),
        "requests": requests,
        "runs": runs,
        "python": sys.version.split()[0],
        "per_request": {name: round(value, 1) for name, value in figures.items()},
    }
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {path}: {record['per_request']}")


def measure(requests: int, variants: list[str]) -> dict[str, float]:
    """Instructions per request of everything on and of each variant."""
    names = [EVERYTHING_ON, *variants]
    with ThreadPoolExecutor(max_workers=2) as runs:
        baseline = runs.submit(count, 0, EVERYTHING_ON)
        totals = {name: runs.submit(count, requests, name) for name in names}
        return {
            name: per_request(total.result(), baseline.result(), requests)
            for name, total in totals.items()
        }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2560, help="requests measured")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        choices=sorted(VARIANTS),
        help="also measure with this part switched off (bench/recording.py's variants)",
    )
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument(
        "--top", type=int, default=15, help="with --bytecodes: functions and modules listed"
    )
    parser.add_argument(
        "--bytecodes", action="store_true", help="trace the bytecodes instead (no valgrind)"
    )
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument(
        "--check", type=Path, help="with --bytecodes: fail when over the budget in this file"
    )
    budget.add_argument(
        "--write", type=Path, help="with --bytecodes: record the budget in this file"
    )
    parser.add_argument(
        "--runs", type=int, default=BUDGET_RUNS, help="traces for --check/--write (smallest)"
    )
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-variant", default=EVERYTHING_ON, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.requests <= 0 or args.requests % IN_FLIGHT:
        parser.error(f"--requests must be a positive multiple of {IN_FLIGHT} (the callers)")
    if (args.check or args.write) and not args.bytecodes:
        parser.error("--check and --write go with --bytecodes")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def main() -> None:
    args = parse_args()
    if args.child is not None:
        child(args.child, args.child_variant)
        return
    if args.check:
        sys.exit(check_budget(args.check, args.requests, args.runs))
    if args.write:
        write_budget(args.write, args.requests, args.runs)
        return
    if args.bytecodes:
        print_bytecodes(trace_bytecodes(args.requests), args.requests, args.top)
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is missing; install it with: apt-get install -y valgrind")
    figures = measure(args.requests, args.variant)
    base = figures[EVERYTHING_ON]
    print(f"{args.requests} requests, {IN_FLIGHT} in flight, {Path(sys.executable).resolve()}")
    for name, value in figures.items():
        difference = "" if name == EVERYTHING_ON else f"   difference {value - base:+9,.0f}"
        label = name if name == EVERYTHING_ON else f"{name} off"
        print(f"{label:<36} {value:>9,.0f} instructions/request{difference}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
