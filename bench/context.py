"""What the context store costs at scale, in memory and in Redis.

    .venv/bin/python bench/context.py [--contexts 1000000] [--backends memory,redis]
                                      [--concurrency 64] [--json bench/context-results.json]

For each backend, through `ContextService` on the backend's own store (no HTTP):

  1. writes: create N short contexts (~150-byte documents), then merge-patch a sample
     of them (read + compare-and-set);
  2. projected reads: every context read through an agent's token grant for `product`;
  3. memory per context: RSS delta (memory) or Redis `used_memory` delta (Redis);
  4. one sweeper pass with 1,000 in-flight references: all contexts live, and (memory)
     after every unreferenced one expired;
  5. a 500-turn session, one turn appended and read back per step: the bytes a
     projection loads stay flat because only live segments are read, while the
     session's whole history keeps growing.

Memory runs on a manual clock (time is moved, not waited for); Redis runs in real
time with a short ttl for the session (one turn every 40 ms, ttl 1.2 s: the same 30
turns live as one turn a minute under the default 30 minutes). Redis keys go under a
private prefix, deleted at the end. With `--contexts` below a million the per-context
figures are measured at that size and the one-million columns are extrapolated
(linear), which the table says. Prints Rich tables and writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import platform
import secrets
import time
from array import array
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
import redis.asyncio as redis_asyncio
from rich.console import Console
from rich.table import Table

from agent_reach.backends.selection import open_backends
from agent_reach.clock import SYSTEM_CLOCK, Clock, ManualClock
from agent_reach.config import Settings
from agent_reach.context.projection import top_level
from agent_reach.context.service import ContextService
from agent_reach.context.tokens import CALLER_GRANT, Grant

ONE_MILLION = 1_000_000
MERGE_SAMPLE = 100_000  # merges are two store calls each; a sample gives the same rates
REFERENCES = 1_000  # in-flight requests holding a context during the sweeper pass
SESSION_TURNS = 500
# Session turns between two table rows: not a multiple of the 50 items of a segment, so
# the rows catch segments part full as well as just closed.
REPORT_EVERY = 20
PAGE_BYTES = 4096  # /proc/self/statm counts pages
# The session's clock: memory moves a manual clock a minute per turn under the default
# 30-minute ttl; Redis cannot be fooled, so it runs the same 30-turn window in real time.
MEMORY_TURN_S, MEMORY_TTL_S = 60.0, 1800.0
REDIS_TURN_S, REDIS_TTL_S = 0.04, 1.2
LONG_TTL_S = 3600.0  # the bulk contexts must outlive the run

PRODUCT_GRANT_FIELDS = ("product",)


def short_document(n: int) -> dict[str, Any]:
    """A typical short context: ~150 bytes of JSON, a few fields, Chinese text."""
    return {
        "product": {"sku": f"SKU-{n:07d}", "name": "蓝色手机 256G"},
        "user": {"id": f"u-{n:07d}", "intent": "还有货吗"},
        "channel": "app",
    }


def turn(n: int) -> dict[str, Any]:
    """One conversation turn: ~200 bytes."""
    role = "user" if n % 2 == 0 else "assistant"
    return {"n": n, "role": role, "text": f"第{n}轮：我买的东西怎么还没到？订单 A-{n:07d} 在路上吗"}


@dataclass
class Latency:
    """Throughput and latency of one kind of operation."""

    operation: str
    count: int
    seconds: float
    ops_per_s: float
    p50_us: float
    p99_us: float
    max_us: float


@dataclass
class SweepPass:
    situation: str
    contexts: int
    held: int
    contexts_removed: int
    seconds: float
    # Memory scans every context, so a pass grows with their number; a Redis pass only
    # holds the referenced ones (Redis expires the rest), so it does not: None there.
    per_million_s: float | None


@dataclass
class SessionPoint:
    turns: int
    all_turns_bytes: int  # the whole history: what a store without segments would read
    turns_bytes_read: int  # what a projection on `turns` loaded
    turns_segments_read: int
    product_bytes_read: int  # what a projection on `product` loaded
    projection_answer_bytes: int  # the JSON an agent gets for `turns`


@dataclass
class BackendReport:
    backend: str
    contexts: int
    extrapolated: bool
    latencies: list[Latency] = field(default_factory=list)
    bytes_per_context: float = 0.0
    memory_at_one_million_mb: float = 0.0
    sweeps: list[SweepPass] = field(default_factory=list)
    session: list[SessionPoint] = field(default_factory=list)


async def timed_calls(
    count: int, concurrency: int, call: Callable[[int], Awaitable[object]], latencies: array[int]
) -> float:
    """Run `call(i)` for i in range(count) on `concurrency` workers; the seconds it took.

    Each call's latency goes into `latencies[i]` (ns), allocated by the caller so that
    memory measured around this run counts the store, not the bookkeeping.
    """
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < count:
            i = next_index
            next_index += 1
            started = time.perf_counter_ns()
            await call(i)
            latencies[i] = time.perf_counter_ns() - started

    started = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(concurrency):
            group.create_task(worker())
    return time.perf_counter() - started


def summarize(operation: str, count: int, seconds: float, latencies: array[int]) -> Latency:
    ordered = sorted(latencies[:count])
    return Latency(
        operation=operation,
        count=count,
        seconds=round(seconds, 2),
        ops_per_s=round(count / seconds),
        p50_us=round(ordered[count // 2] / 1000, 1),
        p99_us=round(ordered[min(count - 1, count * 99 // 100)] / 1000, 1),
        max_us=round(ordered[-1] / 1000, 1),
    )


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE_BYTES


@dataclass
class Backend:
    """A backend under test: its service, its clock, and how to read its memory."""

    name: str
    service: ContextService
    clock: Clock
    used_memory: Callable[[], Awaitable[int]]


@asynccontextmanager
async def open_backend(name: str, redis_url: str, prefix: str) -> AsyncIterator[Backend]:
    clock: Clock = ManualClock() if name == "memory" else SYSTEM_CLOCK
    settings = Settings(
        registry_backend=name, redis_url=redis_url, redis_prefix=prefix, redis_timeout_s=5.0
    )
    backends = await open_backends(settings, clock)
    admin = redis_asyncio.Redis.from_url(redis_url)

    async def used_memory() -> int:
        if name == "memory":
            gc.collect()
            return rss_bytes()
        return int((await admin.info("memory"))["used_memory"])

    try:
        service = await ContextService.open(backends.contexts, clock, settings)
        yield Backend(name, service, clock, used_memory)
    finally:
        await backends.aclose()
        if name == "redis":
            await delete_prefix(admin, prefix)
        await admin.aclose()


async def delete_prefix(client: redis_asyncio.Redis, prefix: str) -> None:
    batch: list[bytes] = []
    async for key in client.scan_iter(match=f"{prefix}:*", count=10_000):
        batch.append(key)
        if len(batch) >= 10_000:
            await client.unlink(*batch)
            batch.clear()
    if batch:
        await client.unlink(*batch)


async def bench_bulk(backend: Backend, count: int, concurrency: int, report: BackendReport) -> None:
    service = backend.service
    ids: list[str] = [""] * count
    latencies = array("q", bytes(8 * count))
    before = await backend.used_memory()

    async def create(i: int) -> None:
        ids[i] = (await service.create(short_document(i), LONG_TTL_S)).context_id

    seconds = await timed_calls(count, concurrency, create, latencies)
    report.bytes_per_context = round((await backend.used_memory() - before) / count, 1)
    report.memory_at_one_million_mb = round(report.bytes_per_context * ONE_MILLION / 2**20, 1)
    report.latencies.append(summarize("create", count, seconds, latencies))

    async def projected_read(i: int) -> None:
        grant = Grant(ids[i], PRODUCT_GRANT_FIELDS, PRODUCT_GRANT_FIELDS)
        await service.read(ids[i], grant)

    seconds = await timed_calls(count, concurrency, projected_read, latencies)
    report.latencies.append(summarize("projected read", count, seconds, latencies))

    async def merge(i: int) -> None:
        await service.merge(ids[i], CALLER_GRANT, {"user": {"intent": "退货"}, "step": 2})

    sample = min(count, MERGE_SAMPLE)
    seconds = await timed_calls(sample, concurrency, merge, latencies)
    report.latencies.append(summarize("merge (read + CAS)", sample, seconds, latencies))
    await bench_sweeps(backend, ids, report)


async def bench_sweeps(backend: Backend, ids: list[str], report: BackendReport) -> None:
    service = backend.service
    for i in range(REFERENCES):
        service.references.take(f"req-{i}", ids[i])
    scale = ONE_MILLION / len(ids) if isinstance(backend.clock, ManualClock) else None
    report.sweeps.append(await timed_sweep(service, "all live", len(ids), scale))
    if isinstance(backend.clock, ManualClock):
        backend.clock.advance(LONG_TTL_S + 1)
        expired = await timed_sweep(service, "all expired but the held", len(ids), scale)
        report.sweeps.append(expired)
    for i in range(REFERENCES):
        await service.release(f"req-{i}")


async def timed_sweep(
    service: ContextService, situation: str, contexts: int, scale: float | None
) -> SweepPass:
    gc.collect()
    started = time.perf_counter()
    swept = await service.sweeper.sweep_once()
    seconds = time.perf_counter() - started
    return SweepPass(
        situation=situation,
        contexts=contexts,
        held=swept.held,
        contexts_removed=swept.contexts_removed,
        seconds=round(seconds, 3),
        per_million_s=None if scale is None else round(seconds * scale, 3),
    )


async def bench_session(backend: Backend, report: BackendReport) -> None:
    """Append 500 turns, one per step, and read the projections back after each."""
    service, store, clock = backend.service, backend.service.store, backend.clock
    is_memory = isinstance(clock, ManualClock)
    turn_s, ttl_s = (MEMORY_TURN_S, MEMORY_TTL_S) if is_memory else (REDIS_TURN_S, REDIS_TTL_S)
    created = await service.create(short_document(0), ttl_s)
    context_id = created.context_id
    turns_grant = Grant(context_id, ("turns",), ("turns",))
    all_turns_bytes = 0
    started = time.perf_counter()
    for n in range(1, SESSION_TURNS + 1):
        await service.append(context_id, CALLER_GRANT, "turns", [turn(n)])
        all_turns_bytes += len(orjson.dumps(turn(n)))
        if n % REPORT_EVERY == 0:
            turns_read = await store.read(context_id, top_level(("turns",)))
            product_read = await store.read(context_id, top_level(PRODUCT_GRANT_FIELDS))
            view = await service.read(context_id, turns_grant)
            assert turns_read is not None and product_read is not None
            report.session.append(
                SessionPoint(
                    turns=n,
                    all_turns_bytes=all_turns_bytes,
                    turns_bytes_read=turns_read.bytes_read,
                    turns_segments_read=turns_read.segments_read,
                    product_bytes_read=product_read.bytes_read,
                    projection_answer_bytes=len(orjson.dumps(view.document)),
                )
            )
        if isinstance(clock, ManualClock):
            clock.advance(turn_s)
        else:  # pace the turns in real time, as a conversation would arrive
            await asyncio.sleep(max(0.0, started + n * turn_s - time.perf_counter()))


def print_report(console: Console, reports: list[BackendReport]) -> None:
    ops = Table(title="Context store: throughput and latency (ContextService on the store)")
    for column in ("backend", "operation", "count", "ops/s", "p50 µs", "p99 µs", "max µs"):
        ops.add_column(column, justify="left" if column in ("backend", "operation") else "right")
    for report in reports:
        for lat in report.latencies:
            ops.add_row(
                report.backend,
                lat.operation,
                f"{lat.count:,}",
                f"{lat.ops_per_s:,}",
                f"{lat.p50_us:,.1f}",
                f"{lat.p99_us:,.1f}",
                f"{lat.max_us:,.1f}",
            )
    console.print(ops)

    memory = Table(title="Memory per short context")
    for column in ("backend", "contexts measured", "bytes / context", "at 1 M contexts"):
        memory.add_column(column, justify="right")
    for report in reports:
        note = " (extrapolated)" if report.extrapolated else ""
        memory.add_row(
            report.backend,
            f"{report.contexts:,}",
            f"{report.bytes_per_context:,.0f}",
            f"{report.memory_at_one_million_mb:,.0f} MiB{note}",
        )
    console.print(memory)

    sweeps = Table(
        title=f"One sweeper pass ({REFERENCES:,} contexts referenced by in-flight requests)"
    )
    for column in ("backend", "situation", "contexts", "held", "removed", "seconds", "s per 1 M"):
        sweeps.add_column(column, justify="left" if column in ("backend", "situation") else "right")
    for report in reports:
        for sweep in report.sweeps:
            sweeps.add_row(
                report.backend,
                sweep.situation,
                f"{sweep.contexts:,}",
                f"{sweep.held:,}",
                f"{sweep.contexts_removed:,}",
                f"{sweep.seconds:.3f}",
                "-" if sweep.per_million_s is None else f"{sweep.per_million_s:.3f}",
            )
    console.print(sweeps)

    for report in reports:
        title = f"{report.backend}: a {SESSION_TURNS}-turn session, bytes loaded per projected read"
        session = Table(title=title)
        for column in (
            "turns",
            "whole history B",
            "`turns` read B",
            "segments read",
            "`product` read B",
            "agent gets B",
        ):
            session.add_column(column, justify="right")
        for point in report.session:
            session.add_row(
                str(point.turns),
                f"{point.all_turns_bytes:,}",
                f"{point.turns_bytes_read:,}",
                str(point.turns_segments_read),
                f"{point.product_bytes_read:,}",
                f"{point.projection_answer_bytes:,}",
            )
        console.print(session)


async def run(args: argparse.Namespace, console: Console) -> list[BackendReport]:
    reports = []
    for name in args.backends.split(","):
        prefix = f"bench-ctx-{secrets.token_hex(4)}"
        report = BackendReport(name, args.contexts, extrapolated=args.contexts < ONE_MILLION)
        console.print(f"[bold]{name}[/]: {args.contexts:,} contexts ...")
        async with open_backend(name, args.redis_url, prefix) as backend:
            await bench_bulk(backend, args.contexts, args.concurrency, report)
        async with open_backend(name, args.redis_url, prefix) as backend:
            await bench_session(backend, report)
        reports.append(report)
    return reports


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--contexts", type=int, default=ONE_MILLION)
    parser.add_argument("--backends", default="memory,redis")
    parser.add_argument("--concurrency", type=int, default=64, help="operations in flight")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--json", default="bench/context-results.json", help="results file")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    console = Console()
    reports = asyncio.run(run(args, console))
    print_report(console, reports)
    document = {
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "arguments": vars(args),
        "reports": [asdict(report) for report in reports],
    }
    Path(args.json).write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    console.print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
