"""Two Python interpreters on the same hot path, paired: what the interpreter's build is worth.

    .venv/bin/python bench/interpreters.py OTHER_PYTHON [--rounds 14] [--requests 6400]

Each interpreter runs the in-process coordinator of `bench/recording.py` (as deployed:
memory backend, keys, access rules, a quota, the decision log, tracing) in a process of
its own, pinned to CPU 1, with its own echo agent on CPU 0. Both are started and warmed
up first; then every round asks each in turn for `--requests` invokes, 64 in flight, and
reads back the CPU µs per request. Reported: each one's median, and the median over
rounds of the second's figure over the first's, a ratio the machine's drift (tens of per
cent within minutes here) moves far less than either figure.

OTHER_PYTHON must import Agent-Reach and its dependencies: a virtual environment made
with it, e.g. `/usr/bin/python3.11 -m venv /tmp/v && /tmp/v/bin/pip install -e .`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from recording import COORDINATOR_CPU, coordinator  # noqa: E402

WARMUP = 6400  # requests per warm-up run, as bench/recording.py's default
READY = "ready"


def serve_lines(warmup: int) -> None:
    """The child: warm up, say READY, then answer each line `N` with the CPU µs per
    request of N invokes, until standard input ends."""
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(0, {COORDINATOR_CPU})
    with coordinator(warmup) as timed:
        print(READY, flush=True)
        for line in sys.stdin:
            print(f"{timed(int(line)):.3f}", flush=True)


class Child:
    """One interpreter's coordinator, driven a line at a time."""

    def __init__(self, python: str, warmup: int) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(REPO / "src"), env.get("PYTHONPATH")])
        )
        self.python = python
        self.process = subprocess.Popen(
            [python, __file__, "--serve", str(warmup)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        if self._line() != READY:
            raise RuntimeError(f"{python} did not start its coordinator")

    def cpu_us_per_request(self, requests: int) -> float:
        assert self.process.stdin is not None  # a pipe
        self.process.stdin.write(f"{requests}\n")
        self.process.stdin.flush()
        return float(self._line())

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        if self.process.wait(timeout=30) != 0:
            raise RuntimeError(f"{self.python}'s coordinator exited with {self.process.returncode}")

    def _line(self) -> str:
        assert self.process.stdout is not None  # a pipe
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.python}'s coordinator ended early")
        return line.strip()


@contextlib.contextmanager
def children(pythons: list[str], warmup: int) -> Iterator[list[Child]]:
    started: list[Child] = []
    try:
        for python in pythons:
            started.append(Child(python, warmup))
        yield started
    finally:
        for child in started:
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                child.close()
            child.process.kill()


def paired(first: list[float], second: list[float]) -> float:
    """The median over rounds of the second's figure over the first's."""
    return statistics.median(b / a for a, b in zip(first, second, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", nargs="?", help="the interpreter to compare with this one")
    parser.add_argument("--rounds", type=int, default=14, help="paired rounds")
    parser.add_argument("--requests", type=int, default=6400, help="requests per run")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve_lines(args.serve)
        return
    if args.other is None:
        parser.error("name the interpreter to compare with")
    pythons = [sys.executable, args.other]
    figures: list[list[float]] = [[], []]
    with children(pythons, WARMUP) as started:
        for _ in range(args.rounds):
            for child, values in zip(started, figures, strict=True):
                values.append(child.cpu_us_per_request(args.requests))
    for python, values in zip(pythons, figures, strict=True):
        print(f"{python:<48} median {statistics.median(values):7.1f} µs/request")
    print(f"paired ratio, second over first: {paired(*figures):.3f} over {args.rounds} rounds")


if __name__ == "__main__":
    main()
