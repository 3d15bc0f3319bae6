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
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from recording import VARIANTS, deployed, replaced, serving  # noqa: E402

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
    admin = secrets.token_urlsafe(32)
    with (
        tempfile.TemporaryDirectory() as directory,
        deployed(Path(directory), admin),
        serving(admin, WARMUP) as timed,
    ):
        if requests:
            with replaced(VARIANTS.get(variant, ())):
                timed(requests)


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
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-variant", default=EVERYTHING_ON, help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.child is not None:
        child(args.child, args.child_variant)
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is missing; install it with: apt-get install -y valgrind")
    figures = measure(args.requests, args.variant)
    base = figures[EVERYTHING_ON]
    print(f"{args.requests} requests, 64 in flight, {Path(sys.executable).resolve()}")
    for name, value in figures.items():
        difference = "" if name == EVERYTHING_ON else f"   difference {value - base:+9,.0f}"
        label = name if name == EVERYTHING_ON else f"{name} off"
        print(f"{label:<36} {value:>9,.0f} instructions/request{difference}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
