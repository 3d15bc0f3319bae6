"""Quality of delegated work: an instance that bounces half its requests loses its share.

    .venv/bin/python bench/quality.py [--requests 1000] [--concurrency 8] [--window-s 10]
        [--redis-url redis://127.0.0.1:6379/0] [--json out.json]

Protocol, fixed before any figure was seen:

- A real coordinator (in this process, on its own thread and loop; memory backend, or
  Redis with `--redis-url`) with the default policy but `[quality] window_s` short
  (`--window-s`, 10 s), so that "after the window" comes within a bench run.
- Two real HTTP agent instances of one capability, the same capacity and service time
  (`--capacity`, `--service-ms`): `steady` serves everything, `bouncer` answers 421
  "not mine" to every other delivery it gets (50 %, deterministically).
- Phase `bouncing`: `--requests` invokes naming the capability, `--concurrency` at once.
  Per request: which instance was tried first (the routing decision), whether it was
  bounced, and the caller's answer. The bouncer's share is the share of requests tried
  on it first: over the first `--concurrency` requests (sent at once, before any outcome is
  known: the two instances are alike), then per block of 100 requests.
- Phase `behaving`: the bouncer stops bouncing; requests keep coming for one window.
- Phase `after the window`: `--after` more requests; the bouncer's share again.

`--quality-weight W` runs the same with the quality factor's weight at W (the default
preset's other weights as they are): 0 shows what the factor itself does, and a sweep
shows which weight the claim needs (the preset's 0.10 comes from one).

Checks: the bouncer's share is about half at the start and under 10 % over the last
500 requests of `bouncing`; every bounced request was served by the sibling within the same
request (0 failed to the caller, in every phase); its share in the last block after
the window is back to at least a third (it climbs back as it is tried again: its
bounces are forgotten, and the work it then does well counts).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from agent_reach.config import Settings
from agent_reach.policy.weights import PRESETS
from agent_reach.testing.bouncer import BouncingAgent
from agent_reach.testing.servers import ServerThread, run_coordinator

CAPABILITY = "quality.echo"
BLOCK = 100  # requests per share figure
# The first wave's share: two instances alike, each of `--concurrency` (8) requests a
# coin toss or the other's load, so about half give or take a binomial's spread.
ABOUT_HALF = (0.25, 0.75)
FALLEN = 0.10  # the share over the last LAST requests, once its quality is known
LAST = 500
BACK = 1 / 3  # the share after the window, once it behaves


def weights_line(quality: float | None) -> str:
    """The policy's `weights`: the default preset's with `quality` at the given weight."""
    if quality is None:
        return ""
    weights = {**PRESETS["default"], "quality": quality}
    return "weights = { " + ", ".join(f"{k} = {v}" for k, v in weights.items()) + " }\n"


@dataclass(frozen=True, slots=True)
class Outcome:
    """One request as its caller saw it."""

    status: int
    first: str | None  # the instance tried first
    served_by: str | None
    bounced: bool  # an attempt was answered 421
    error: str | None = None  # the error code of a failed request


@dataclass(frozen=True, slots=True)
class Phase:
    """A phase's figures."""

    name: str
    requests: int
    start_share: float  # over the first `start` requests
    bouncer_share: float
    last_share: float  # over the last LAST requests
    block_shares: list[float]
    bounced: int
    bounced_served_by_sibling: int
    failed: int
    errors: dict[str, int]  # the failed requests' error codes


def outcome_of(status: int, body: dict[str, Any]) -> Outcome:
    """A request's outcome from its invoke answer (or error body)."""
    attempts = body.get("attempts") or (body.get("error") or {}).get("attempts") or []
    first = attempts[0]["agent_id"] if attempts else None
    bounced = any(a.get("http_status") == 421 for a in attempts)
    error = (body.get("error") or {}).get("code") if status != 200 else None
    return Outcome(status, first, body.get("agent_id"), bounced, error)


def share(outcomes: Sequence[Outcome], agent_id: str) -> float:
    """The share of requests tried first on `agent_id`."""
    if not outcomes:
        return 0.0
    return sum(o.first == agent_id for o in outcomes) / len(outcomes)


def blocks(outcomes: Sequence[Outcome], size: int = BLOCK) -> Iterator[Sequence[Outcome]]:
    for start in range(0, len(outcomes), size):
        yield outcomes[start : start + size]


def phase_of(
    name: str, outcomes: Sequence[Outcome], bouncer: str, sibling: str, start: int
) -> Phase:
    bounced = [o for o in outcomes if o.bounced]
    return Phase(
        name=name,
        requests=len(outcomes),
        start_share=round(share(outcomes[:start], bouncer), 3),
        bouncer_share=round(share(outcomes, bouncer), 3),
        last_share=round(share(outcomes[-LAST:], bouncer), 3),
        block_shares=[round(share(b, bouncer), 3) for b in blocks(outcomes)],
        bounced=len(bounced),
        bounced_served_by_sibling=sum(o.status == 200 and o.served_by == sibling for o in bounced),
        failed=sum(o.status != 200 for o in outcomes),
        errors=dict(Counter(str(o.error) for o in outcomes if o.status != 200)),
    )


def checks(phases: dict[str, Phase]) -> dict[str, bool]:
    """The claims, each true or false."""
    bouncing, after = phases["bouncing"], phases["after the window"]
    low, high = ABOUT_HALF
    return {
        "about half at the start": low <= bouncing.start_share <= high,
        "last 500 under 10 %": bouncing.last_share < FALLEN,
        "every bounce served by the sibling": bouncing.bounced
        == bouncing.bounced_served_by_sibling,
        "0 failed to the caller": all(p.failed == 0 for p in phases.values()),
        "share back after the window": after.block_shares[-1] >= BACK,
    }


def table(phases: dict[str, Phase], passed: dict[str, bool]) -> Table:
    grid = Table(title="An instance that bounces 50 % (421) beside a steady sibling")
    columns = (
        "phase",
        "requests",
        "at start",
        "share",
        "last 500",
        "per 100",
        "bounced",
        "by sibling",
    )
    for column in columns:
        grid.add_column(column)
    grid.add_column("failed", justify="right")
    for p in phases.values():
        per_block = " ".join(f"{s:.0%}" for s in p.block_shares)
        grid.add_row(
            p.name,
            str(p.requests),
            f"{p.start_share:.0%}",
            f"{p.bouncer_share:.1%}",
            f"{p.last_share:.1%}",
            per_block,
            str(p.bounced),
            str(p.bounced_served_by_sibling),
            str(p.failed),
        )
    for claim, ok in passed.items():
        grid.add_row("check", claim, "ok" if ok else "FAILED", "", "", "", "", "", "")
    return grid


async def drive(
    client: httpx.AsyncClient, count: int | None, seconds: float | None, at_once: int
) -> list[Outcome]:
    """`count` requests (or as many as `seconds` allow), `at_once` in flight, in order."""
    outcomes: list[tuple[int, Outcome]] = []
    numbers = iter(range(count if count is not None else sys.maxsize))
    stop_at = time.monotonic() + seconds if seconds is not None else None

    async def worker() -> None:
        for n in numbers:
            if stop_at is not None and time.monotonic() >= stop_at:
                return
            answer = await client.post("/v1/invoke", json={"capability": CAPABILITY})
            outcomes.append((n, outcome_of(answer.status_code, answer.json())))

    await asyncio.gather(*(worker() for _ in range(at_once)))
    return [o for _, o in sorted(outcomes, key=lambda pair: pair[0])]


@contextmanager
def coordinator(args: argparse.Namespace) -> Iterator[str]:
    with tempfile.TemporaryDirectory() as folder:
        policy = Path(folder) / "policy.toml"
        weights = weights_line(args.quality_weight)
        policy.write_text(f"{weights}[quality]\nwindow_s = {args.window_s}\n", encoding="utf-8")
        shared = (
            {"registry_backend": "redis", "redis_url": args.redis_url} if args.redis_url else {}
        )
        if args.redis_url:
            shared["redis_prefix"] = f"bench-quality-{int(time.time())}"
        settings = Settings(policy_file=policy, decision_log="off", auth="off", **shared)
        with run_coordinator(settings) as (url, _):
            yield url


async def run(args: argparse.Namespace) -> dict[str, Phase]:
    steady = BouncingAgent("steady", delay_s=args.service_ms / 1000)
    bouncer = BouncingAgent("bouncer", bounce_rate=0.5, delay_s=args.service_ms / 1000)
    servers = [ServerThread(agent).start() for agent in (steady, bouncer)]
    try:
        with coordinator(args) as url:
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                for agent, server in zip((steady, bouncer), servers, strict=True):
                    spec = {
                        "id": agent.name,
                        "capabilities": [CAPABILITY],
                        "capacity": args.capacity,
                        "transport": {"type": "http", "endpoint": f"{server.url}/invoke"},
                    }
                    (await client.post("/v1/agents", json=spec)).raise_for_status()
                await _healthy(client)
                bouncing = await drive(client, args.requests, None, args.concurrency)
                bouncer.bounce_rate = 0.0
                behaving = await drive(client, None, args.window_s, args.concurrency)
                after = await drive(client, args.after, None, args.concurrency)
    finally:
        for server in servers:
            server.stop()
    named = {"bouncing": bouncing, "behaving": behaving, "after the window": after}
    start = args.concurrency
    return {name: phase_of(name, o, "bouncer", "steady", start) for name, o in named.items()}


async def _healthy(client: httpx.AsyncClient) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        agents = (await client.get("/v1/agents")).json()["agents"]
        if len(agents) == 2 and all(a["status"] == "healthy" for a in agents):
            return
        await asyncio.sleep(0.1)
    raise SystemExit("the two agents never became healthy")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--after", type=int, default=500, help="requests after the window")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--capacity", type=int, default=8)
    parser.add_argument("--service-ms", type=float, default=10.0)
    parser.add_argument("--window-s", type=float, default=10.0)
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--quality-weight", type=float, default=None, help="default: the preset's")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    phases = asyncio.run(run(args))
    passed = checks(phases)
    Console().print(table(phases, passed))
    if args.json is not None:
        document = {
            "settings": vars(args) | {"json": str(args.json)},
            "phases": {name: asdict(p) for name, p in phases.items()},
            "checks": passed,
        }
        args.json.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return 0 if all(passed.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
