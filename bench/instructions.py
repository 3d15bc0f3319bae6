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
functions that execute the most.
"""

from __future__ import annotations

import argparse
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
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from agent_reach.invoke.service import InvokeService

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import recording  # noqa: E402
from recording import IN_FLIGHT, VARIANTS, coordinator, replaced  # noqa: E402

WARMUP = 640  # requests per warm-up run: every code path taken and every cache filled
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


class Bytecodes:
    """Bytecodes executed and frames entered (or resumed), per code object, of the runs
    made while `traced_runs` is in force, in the thread that makes them."""

    def __init__(self) -> None:
        self.executed: Counter[CodeType] = Counter()
        self.entered: Counter[CodeType] = Counter()

    def _entered(self, frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        self.entered[frame.f_code] += 1
        return self._executed

    def _executed(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            self.executed[frame.f_code] += 1
        return self._executed

    @contextlib.contextmanager
    def traced_runs(self) -> Iterator[None]:
        """bench/recording.py's runs traced in the coordinator's loop thread, where they run."""
        runner = recording._runner

        def traced(
            service: InvokeService, key: str, requests: int
        ) -> Callable[[], Coroutine[Any, Any, float]]:
            run = runner(service, key, requests)

            async def traced_run() -> float:
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


def print_bytecodes(counts: Bytecodes, requests: int, top: int = 15) -> None:
    executed = sum(counts.executed.values())
    entered = sum(counts.entered.values())
    print(
        f"{requests} requests: {executed / requests:,.0f} bytecodes and "
        f"{entered / requests:,.1f} Python frames entered or resumed per request"
    )
    for code, n in counts.executed.most_common(top):
        where = f"{Path(code.co_filename).name}:{code.co_firstlineno} {code.co_qualname}"
        print(f"{n / requests:8,.0f}  {where}")


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
        "--bytecodes", action="store_true", help="trace the bytecodes instead (no valgrind)"
    )
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-variant", default=EVERYTHING_ON, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.requests <= 0 or args.requests % IN_FLIGHT:
        parser.error(f"--requests must be a positive multiple of {IN_FLIGHT} (the callers)")
    return args


def main() -> None:
    args = parse_args()
    if args.child is not None:
        child(args.child, args.child_variant)
        return
    if args.bytecodes:
        print_bytecodes(trace_bytecodes(args.requests), args.requests)
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
