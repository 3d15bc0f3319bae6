"""Catalogs of 1,000 and 5,000 description-only tools: fit, memory, decisions, one more tool.

A real coordinator process on one core (the client on the other), the default policy,
everything through the HTTP API. The tools are MetaTool's 199 ChatGPT plugins (`--data
DIR/metatool`), each known by its name and one sentence, repeated with a variant
qualifier and a numbered name until the catalog has N of them (every card text is
distinct, so nothing is encoded once for two tools), registered as agents of 100 tools
each, as MCP servers are. For each N it measures:

- **fit**: from the last registration until `GET /v1/policy` says every matcher is
  fitted and calibrated (`matching.current`), wall time and the coordinator's CPU time;
- **memory**: the coordinator's resident size then;
- **decisions**: `POST /v1/route` of 200 MetaTool queries, one at a time: p50 and p99
  with the default `top_k` (3: the router's own matches), and with `top_k` 20 (the
  semantic index ranks the rest), after the index's first fill (timed); and how often
  the query's own tool is first, and among the first five, of `ranked` (meaningful
  at `--sizes 199`, MetaTool's own catalog: above it, variants of the tool compete);
- **one more tool**: an agent with one new tool registers; the time until the router is
  fitted and calibrated again, and until a `top_k` 5 ranking for the new tool's own
  words lists it (the semantic index encodes only the new text).

    python bench/scale_catalog.py --data DIR [--sizes 1000,5000] [--fit-timeout-s S] [--json FILE]

On a shared machine the wall times stretch with the load; the CPU seconds do not.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import random
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from agent_reach.testing.agent_process import CoordinatorProcess

SIZES = (1000, 5000)
Report = Callable[[dict[str, Any]], None]
TOOLS_PER_AGENT = 100
QUERIES = 200
SEED = 45
READY_TIMEOUT_S = 3 * 3600.0  # a full fit of 5,000 classes takes minutes on a busy core
QUALIFIERS = [
    "",
    "For business accounts: ",
    "Community edition. ",
    "In Europe: ",
    "Beta: ",
    "For teams: ",
    "Lite version. ",
    "Pro: ",
    "For students: ",
    "Asia-Pacific: ",
    "Classic: ",
    "Mobile: ",
    "Enterprise: ",
    "Open source port. ",
    "For developers: ",
    "Legacy: ",
    "Nightly build. ",
    "For nonprofits: ",
    "Regional mirror. ",
    "Self-hosted: ",
    "Premium: ",
    "For families: ",
    "Offline-first: ",
    "Accessible edition. ",
    "Government: ",
    "Experimental: ",
]
NEW_TOOL = ("kiln_scheduler", "Schedule firing times and temperatures for a pottery kiln")
NEW_TOOL_QUERY = "when should I fire my pottery kiln and how hot"


def tools_of(data: Path, n: int) -> dict[str, str]:
    """N description-only tools: MetaTool's, each repeated with a qualifier and a number."""
    base = json.loads((data / "metatool" / "tools.json").read_text())
    names = sorted(base)
    if n > len(names) * len(QUALIFIERS):
        raise SystemExit(f"at most {len(names) * len(QUALIFIERS)} tools can be made")
    tools = {}
    for i in range(n):
        name, variant = names[i % len(names)], i // len(names)
        tag = _tag(name)
        tools[f"{tag}_{variant}" if variant else tag] = QUALIFIERS[variant] + base[name]
    return tools


def queries_of(data: Path) -> list[tuple[str, str]]:
    """QUERIES MetaTool queries, each with its tool's tag (as `tools_of` names the first
    copy of each tool)."""
    with (data / "metatool" / "queries.csv").open(newline="") as rows:
        pairs = [(row["Query"], _tag(row["Tool"])) for row in csv.DictReader(rows)]
    return random.Random(SEED).sample(pairs, QUERIES)


def _tag(name: str) -> str:
    return re.sub(r"[^a-z0-9_]", "_", name.strip().lower())


class Coordinator:
    """A coordinator process pinned to one core, and a client for it on the others."""

    def __init__(self, directory: Path) -> None:
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[0]})  # the child inherits one core...
        self.process = CoordinatorProcess(
            directory=directory, probe_interval_s=3600, extra_env={"AR_AUTH": "off"}
        ).start()
        os.sched_setaffinity(0, set(cores[1:]) or {cores[0]})  # ...the client keeps the rest
        self.http = httpx.AsyncClient(base_url=self.process.url, timeout=600)

    async def register(self, agent: str, tools: dict[str, str]) -> None:
        body = {
            "id": agent,
            "capabilities": list(tools),
            "skills": [{"capability": t, "description": d} for t, d in tools.items()],
            "ttl": 86_400,
            "transport": {"endpoint": f"http://127.0.0.1:9/{agent}"},
        }
        (await self.http.post("/v1/agents", json=body)).raise_for_status()

    async def fitted(self, after: float, timeout_s: float) -> float:
        """Seconds from `after` until every matcher is fitted and calibrated on the
        catalog as it is now (a catalog change makes the fit stale at once)."""
        while time.perf_counter() - after < timeout_s:
            matching = (await self.http.get("/v1/policy")).json()["matching"]
            if matching["current"]:
                return time.perf_counter() - after
            await asyncio.sleep(0.2)
        raise TimeoutError("the coordinator did not finish fitting")

    async def route(self, text: str, top_k: int) -> tuple[float, dict[str, Any]]:
        started = time.perf_counter()
        answer = await self.http.post("/v1/route", json={"text": text, "top_k": top_k})
        answer.raise_for_status()
        return (time.perf_counter() - started) * 1000, answer.json()

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        found = re.search(r"VmRSS:\s+(\d+)", status)
        return int(found.group(1)) / 1024 if found else 0.0

    async def aclose(self) -> None:
        await self.http.aclose()
        self.process.stop()


def _percentiles(latencies: list[float]) -> tuple[float, float]:
    ordered = sorted(latencies)
    return (
        round(statistics.median(ordered), 1),
        round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 1),
    )


async def measure(data: Path, n: int, fit_timeout_s: float, report: Report) -> dict[str, Any]:
    """The figures of one catalog size, each `report`ed as soon as it is measured."""
    tools = tools_of(data, n)
    queries = queries_of(data)
    names = list(tools)
    result: dict[str, Any] = {"tools": n}
    with tempfile.TemporaryDirectory() as directory:
        coordinator = Coordinator(Path(directory))
        try:
            await coordinator.fitted(time.perf_counter(), READY_TIMEOUT_S)  # the empty catalog
            cpu = coordinator.cpu_s()
            for start in range(0, n, TOOLS_PER_AGENT):
                part = {t: tools[t] for t in names[start : start + TOOLS_PER_AGENT]}
                await coordinator.register(f"server-{start // TOOLS_PER_AGENT}", part)
            registered = time.perf_counter()
            try:
                result["fit_s"] = round(await coordinator.fitted(registered, fit_timeout_s), 1)
            except TimeoutError:
                result["fit_s"] = None
                result["fit_unfinished_after_cpu_s"] = round(coordinator.cpu_s() - cpu, 1)
                result["rss_mb"] = round(coordinator.rss_mb())
                report(result)
                return result
            result["fit_cpu_s"] = round(coordinator.cpu_s() - cpu, 1)
            result["rss_mb"] = round(coordinator.rss_mb())
            report(result)
            result |= await decisions(coordinator, queries, 3, "top3")
            cpu = coordinator.cpu_s()
            fill_ms, _ = await coordinator.route(queries[0][0], 20)
            result["index_fill_ms"] = round(fill_ms)
            result["index_fill_cpu_s"] = round(coordinator.cpu_s() - cpu, 1)
            result |= await decisions(coordinator, queries, 20, "top20")
            result["rss_with_index_mb"] = round(coordinator.rss_mb())
            report(result)
            cpu = coordinator.cpu_s()
            await coordinator.register("server-new", dict([NEW_TOOL]))
            added = time.perf_counter()
            while time.perf_counter() - added < fit_timeout_s:
                _, decision = await coordinator.route(NEW_TOOL_QUERY, 5)
                if NEW_TOOL[0] in [r["capability"] for r in decision["ranked"]]:
                    result["new_tool_ranked_s"] = round(time.perf_counter() - added, 2)
                    break
            try:
                result["refit_s"] = round(await coordinator.fitted(added, fit_timeout_s), 1)
            except TimeoutError:
                result["refit_s"] = None
            result["refit_cpu_s"] = round(coordinator.cpu_s() - cpu, 1)
            report(result)
        finally:
            await coordinator.aclose()
    return result


async def decisions(
    coordinator: Coordinator, queries: list[str], top_k: int, label: str
) -> dict[str, float]:
    """p50 and p99 of the queries routed one at a time, and the coordinator's CPU time per
    decision (steady on a shared machine, where the wall time is not)."""
    cpu = coordinator.cpu_s()
    answers = [await coordinator.route(q, top_k) for q, _ in queries]
    p50, p99 = _percentiles([ms for ms, _ in answers])
    per = (coordinator.cpu_s() - cpu) / len(queries) * 1000
    figures = {f"{label}_p50_ms": p50, f"{label}_p99_ms": p99, f"{label}_cpu_ms": round(per, 1)}
    # the query's tool among the first 1 and 5 ranked: meaningful where the catalog is
    # MetaTool's own (no variant of the tool competes with it)
    ranked = [[r["capability"] for r in answer["ranked"]] for _, answer in answers]
    tags = [tag for _, tag in queries]
    figures[f"{label}_right_first"] = round(
        sum(r[:1] == [t] for r, t in zip(ranked, tags, strict=True)) / len(tags), 3
    )
    figures[f"{label}_right_in_5"] = round(
        sum(t in r[:5] for r, t in zip(ranked, tags, strict=True)) / len(tags), 3
    )
    return figures


def table(results: list[dict[str, Any]]) -> str:
    rows = [
        "| tools | fit (CPU) | memory | decision p50 / p99 (CPU), top_k 3 | index fill (CPU) "
        "| decision p50 / p99 (CPU), top_k 20 | right tool first / in 5 "
        "| one more tool: ranked | refit (CPU) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r.get("fit_s") is None:
            rows.append(
                f"| {r['tools']:,} | unfinished ({r.get('fit_unfinished_after_cpu_s')} CPU s) "
                f"| {r.get('rss_mb')} MB |||||"
            )
            continue
        rows.append(
            f"| {r['tools']:,} | {r['fit_s']} s ({r['fit_cpu_s']} s) "
            f"| {r['rss_mb']} MB ({r['rss_with_index_mb']} MB with the index) "
            f"| {r['top3_p50_ms']} / {r['top3_p99_ms']} ms ({r['top3_cpu_ms']} ms) "
            f"| {r['index_fill_ms']} ms ({r['index_fill_cpu_s']} s) "
            f"| {r['top20_p50_ms']} / {r['top20_p99_ms']} ms ({r['top20_cpu_ms']} ms) "
            f"| {r['top20_right_first']:.1%} / {r['top20_right_in_5']:.1%} "
            f"| {r.get('new_tool_ranked_s')} s | {r['refit_s']} s ({r['refit_cpu_s']} s) |"
        )
    return "\n".join(rows)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--fit-timeout-s", type=float, default=READY_TIMEOUT_S)
    parser.add_argument("--json", type=Path, default=Path("bench-scale-catalog.json"))
    args = parser.parse_args()
    results: list[dict[str, Any]] = []

    def report(result: dict[str, Any]) -> None:
        print(json.dumps(result), flush=True)
        args.json.write_text(json.dumps([*results, result], indent=2))

    for n in map(int, args.sizes.split(",")):
        results.append(await measure(args.data, n, args.fit_timeout_s, report))
    print(table(results))


if __name__ == "__main__":
    asyncio.run(main())
