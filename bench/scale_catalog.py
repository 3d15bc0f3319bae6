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
  semantic index ranks the rest), after the index's first fill (timed);
- **one more tool**: an agent with one new tool registers; the time until the router is
  fitted and calibrated again, and until a `top_k` 5 ranking for the new tool's own
  words lists it (the semantic index encodes only the new text).

    python bench/scale_catalog.py --data DIR [--sizes 1000,5000] [--json FILE]

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
from pathlib import Path
from typing import Any

import httpx

from agent_reach.testing.agent_process import CoordinatorProcess

SIZES = (1000, 5000)
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
        tag = re.sub(r"[^a-z0-9_]", "_", name.lower())
        tools[f"{tag}_{variant}" if variant else tag] = QUALIFIERS[variant] + base[name]
    return tools


def queries_of(data: Path) -> list[str]:
    with (data / "metatool" / "queries.csv").open(newline="") as rows:
        texts = [row["Query"] for row in csv.DictReader(rows)]
    return random.Random(SEED).sample(texts, QUERIES)


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

    async def fitted(self, after: float) -> float:
        """Seconds from `after` until every matcher is fitted and calibrated on the
        catalog as it is now (a catalog change makes the fit stale at once)."""
        while time.perf_counter() - after < READY_TIMEOUT_S:
            matching = (await self.http.get("/v1/policy")).json()["matching"]
            if matching["current"]:
                return time.perf_counter() - after
            await asyncio.sleep(0.2)
        raise TimeoutError("the coordinator did not finish fitting")

    async def route(self, text: str, top_k: int = 3) -> tuple[float, dict[str, Any]]:
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


async def measure(data: Path, n: int) -> dict[str, Any]:
    tools = tools_of(data, n)
    queries = queries_of(data)
    names = list(tools)
    with tempfile.TemporaryDirectory() as directory:
        coordinator = Coordinator(Path(directory))
        try:
            await coordinator.fitted(time.perf_counter())  # the empty catalog
            cpu = coordinator.cpu_s()
            for start in range(0, n, TOOLS_PER_AGENT):
                part = {t: tools[t] for t in names[start : start + TOOLS_PER_AGENT]}
                await coordinator.register(f"server-{start // TOOLS_PER_AGENT}", part)
            registered = time.perf_counter()
            fit_s = await coordinator.fitted(registered)
            fit_cpu_s = coordinator.cpu_s() - cpu
            rss = coordinator.rss_mb()
            top3 = [(await coordinator.route(q))[0] for q in queries]
            cpu = coordinator.cpu_s()
            index_fill_ms, _ = await coordinator.route(queries[0], 20)
            index_fill_cpu_s = coordinator.cpu_s() - cpu
            top20 = [(await coordinator.route(q, 20))[0] for q in queries]
            rss_index = coordinator.rss_mb()
            cpu = coordinator.cpu_s()
            await coordinator.register("server-new", dict([NEW_TOOL]))
            added = time.perf_counter()
            ranked_s = None
            while ranked_s is None and time.perf_counter() - added < READY_TIMEOUT_S:
                _, decision = await coordinator.route(NEW_TOOL_QUERY, 5)
                if NEW_TOOL[0] in [r["capability"] for r in decision["ranked"]]:
                    ranked_s = time.perf_counter() - added
            refit_s = await coordinator.fitted(added)
            refit_cpu_s = coordinator.cpu_s() - cpu
        finally:
            await coordinator.aclose()
    p50, p99 = _percentiles(top3)
    p50_20, p99_20 = _percentiles(top20)
    return {
        "tools": n,
        "fit_s": round(fit_s, 1),
        "fit_cpu_s": round(fit_cpu_s, 1),
        "rss_mb": round(rss),
        "route_p50_ms": p50,
        "route_p99_ms": p99,
        "index_fill_ms": round(index_fill_ms),
        "index_fill_cpu_s": round(index_fill_cpu_s, 1),
        "route_top20_p50_ms": p50_20,
        "route_top20_p99_ms": p99_20,
        "rss_with_index_mb": round(rss_index),
        "new_tool_ranked_s": round(ranked_s, 2) if ranked_s is not None else None,
        "refit_s": round(refit_s, 1),
        "refit_cpu_s": round(refit_cpu_s, 1),
    }


def table(results: list[dict[str, Any]]) -> str:
    rows = [
        "| tools | fit (CPU) | memory | route p50 / p99, top_k 3 | index fill | "
        "route p50 / p99, top_k 20 | one more tool: ranked | one more tool: refit (CPU) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        rows.append(
            f"| {r['tools']:,} | {r['fit_s']} s ({r['fit_cpu_s']} s) "
            f"| {r['rss_mb']} MB ({r['rss_with_index_mb']} MB with the index) "
            f"| {r['route_p50_ms']} / {r['route_p99_ms']} ms "
            f"| {r['index_fill_ms']} ms ({r['index_fill_cpu_s']} CPU s) "
            f"| {r['route_top20_p50_ms']} / {r['route_top20_p99_ms']} ms "
            f"| {r['new_tool_ranked_s']} s | {r['refit_s']} s ({r['refit_cpu_s']} s) |"
        )
    return "\n".join(rows)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--json", type=Path, default=Path("bench-scale-catalog.json"))
    args = parser.parse_args()
    results = []
    for n in map(int, args.sizes.split(",")):
        results.append(await measure(args.data, n))
        print(json.dumps(results[-1]), flush=True)
        args.json.write_text(json.dumps(results, indent=2))
    print(table(results))


if __name__ == "__main__":
    asyncio.run(main())
