"""Chinese requests to tools known only by their Chinese docs (HammerBench's zh data).

    .venv/bin/python bench/zh_tools.py --data DIR [--split dev|test|all] [--sizes 2,5,10]
        [--seed 45] [--json FILE]

`DIR/hammerbench/` holds the corpus, kept outside the project so nobody tunes to it. Two
shapes are read, any mix of them:

- HammerBench's own files (github.com/MadeAgents/HammerBench `data/zh/**/*.json`): lists
  of samples, each with its `messages` and the tools offered with it (`multiple_tools`,
  `single_tool`). A sample gives one request: its first user message (after `query:` when
  the message carries external knowledge before it), and the tool its first function
  call names. Every tool offered anywhere joins the catalog.
- An extract of them: `tools.json` (a list of tools as HammerBench writes them: `name`,
  `description`, `parameters`) and `requests.json` (a list of `{"query", "tool"}`).

A tool becomes a description-only capability, as a federated MCP server's tool does: no
example utterances; its Chinese description and its input schema (property names and
descriptions) are all the router has. Tools are grouped into agents by their app (the
first two parts of `Domain.App.method`), capability `domain.app.method` lower-cased.
A request counts only when its tool is in the catalog. The default policy, the packaged
encoder (or the remote one the AR_EMBEDDING_* settings name), the router's own
calibration; of the router's constants only the docs-only guard was chosen here, on the
development half.

`--split` keeps half of the requests, by a hash of their text (bench/tool_catalogs.py's
rule, as MetaTool's are split): `dev` for choosing a constant of the router, `test` for
the figures reported; `all` (the default) every request. The catalogs hold every tool
whatever the split; only the requests asked are halved.

- **Small catalogs** (`--sizes`): for each request and size n, a catalog of its tool and
  n - 1 others drawn at random (seeded), and one of n tools none of which is of its app
  (a request no offered tool fits: it should be refused). Each catalog is fitted
  afresh, as a new MCP server's tools are.
- **One large catalog**: every tool at once, every request.

For each: how many in-scope requests the router routes to their tool (`POST /v1/route`'s
decision: the matching pipeline and the router, in process), how many it refuses, and
where their tool stands in the `ranked` answer with `top_k` 5 (first, among the five);
for the irrelevant catalogs, how many are refused.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent_reach.backends.protocols import InstanceRecord
from agent_reach.clock import ManualClock
from agent_reach.config import Settings
from agent_reach.model.agents import AgentSpec, SkillSpec, normalize_capability
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.matchers.pipeline import MatchingPipeline
from agent_reach.routing.ranking import CandidateRanking
from agent_reach.routing.router import decide

SIZES = (2, 5, 10)
SEED = 45
TOP_K = 5
ENDPOINT = "http://127.0.0.1:9/invoke"


@dataclass(frozen=True, slots=True)
class Tool:
    name: str  # HammerBench's `Domain.App.method`
    description: str
    parameters: dict[str, Any] | None

    @property
    def capability(self) -> str:
        return str(normalize_capability(re.sub(r"[^A-Za-z0-9_.-]", "-", self.name)))

    @property
    def app(self) -> str:
        return ".".join(self.name.split(".")[:2])


@dataclass(frozen=True, slots=True)
class Request:
    query: str
    tool: str


@dataclass(slots=True)
class Tally:
    """Where a set of requests went on some catalogs."""

    label: str
    catalog_size: float = 0.0  # mean tools per catalog
    in_scope: int = 0
    routed_right: int = 0
    routed_wrong: int = 0
    refused: int = 0
    ranked_first: int = 0
    in_top5: int = 0
    irrelevant: int = 0
    irrelevant_refused: int = 0
    seconds_per_fit: float = 0.0
    encoders: dict[str, int] = field(default_factory=dict)  # which encoder matched the texts
    misses: list[tuple[str, str, str | None]] = field(default_factory=list)

    def percent(self, n: int, of: int) -> str:
        return f"{100 * n / of:5.1f} %" if of else "    -  "


def _query_of(content: str) -> str:
    """The user's own words: after `query:` when external knowledge comes first."""
    head, found, query = content.rpartition("query:")
    return query.strip() if found else head.strip() or content.strip()


def _tool_of(entry: dict[str, Any]) -> Tool:
    return Tool(str(entry["name"]), str(entry.get("description", "")), entry.get("parameters"))


def load(root: Path) -> tuple[dict[str, Tool], list[Request]]:
    """The catalog and the requests of every file under `root` (see the module)."""
    tools: dict[str, Tool] = {}
    requests: list[Request] = []
    for path in sorted(root.rglob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if path.name == "tools.json":
            tools.update((t.name, t) for t in map(_tool_of, data))
        elif path.name == "requests.json":
            requests += [Request(r["query"], r["tool"]) for r in data]
        elif isinstance(data, list):
            for sample in data:
                for entry in (*sample.get("multiple_tools", ()), *sample.get("single_tool", ())):
                    tools.setdefault(entry["name"], _tool_of(entry))
                request = _first_request(sample.get("messages", []))
                if request is not None:
                    requests.append(request)
    unique = list(dict.fromkeys(r for r in requests if r.tool in tools))
    return tools, unique


def _first_request(messages: list[dict[str, Any]]) -> Request | None:
    user = next((m for m in messages if m.get("role") == "user"), None)
    call = next((m for m in messages if m.get("role") == "function call"), None)
    if user is None or call is None or not isinstance(call.get("content"), dict):
        return None
    return Request(_query_of(str(user["content"])), str(call["content"]["name"]))


def catalog_index(tools: Iterable[Tool]) -> RegistryIndex:
    """One agent per app, each tool a description-only skill with its input schema."""
    apps: dict[str, list[Tool]] = {}
    for tool in tools:
        apps.setdefault(tool.app, []).append(tool)
    index = RegistryIndex()
    for app, members in apps.items():
        skills = [
            SkillSpec(capability=t.capability, description=t.description, input_schema=_schema(t))
            for t in members
        ]
        spec = AgentSpec(
            id=re.sub(r"[^a-z0-9-]", "-", app.lower()),
            capabilities=[t.capability for t in members],
            skills=skills,
            transport={"endpoint": ENDPOINT},
        )
        index.upsert(InstanceRecord(spec, 0.0), float("inf")).health = "healthy"
    return index


def _schema(tool: Tool) -> dict[str, Any] | None:
    schema = tool.parameters
    if not isinstance(schema, dict) or not schema.get("properties"):
        return None
    # HammerBench writes `float` where JSON Schema says `number`
    properties = {
        name: {**spec, "type": "number"} if spec.get("type") == "float" else spec
        for name, spec in schema["properties"].items()
    }
    return {**schema, "properties": properties}


class Catalog:
    """A fitted matching pipeline and ranking over some tools."""

    def __init__(self, tools: list[Tool], settings: Settings) -> None:
        self.index = catalog_index(tools)
        self.pipeline = MatchingPipeline(self.index, ManualClock(), settings)
        self.ranking = CandidateRanking(self.index, self.pipeline)
        self.policy = Policy()

    async def __aenter__(self) -> Catalog:
        await self.pipeline.ready(self.policy)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.pipeline.aclose()

    async def ask(self, text: str, tally: Tally) -> tuple[str | None, list[str]]:
        """(the capability the router routes to or None, the `top_k` 5 ranking)."""
        matched = await self.pipeline.match(text, self.policy)
        encoder = str(matched.text.encoder)
        tally.encoders[encoder] = tally.encoders.get(encoder, 0) + 1
        decision = decide(
            matched.matches, self.index, self.policy, now=0.0, from_text=True, text=matched.text
        )
        ranked = await self.ranking.rank(text, self.policy, lambda _: True, TOP_K)
        return decision.capability, [r.capability for r in ranked]


def _count(tally: Tally, request: Request, tool: Tool, went: str | None, ranked: list[str]) -> None:
    tally.in_scope += 1
    if went == tool.capability:
        tally.routed_right += 1
    elif went is None:
        tally.refused += 1
    else:
        tally.routed_wrong += 1
    if went != tool.capability:
        tally.misses.append((request.query, tool.capability, went))
    tally.ranked_first += bool(ranked) and ranked[0] == tool.capability
    tally.in_top5 += tool.capability in ranked[:TOP_K]


async def small_catalogs(
    tools: dict[str, Tool], requests: list[Request], size: int, seed: int, settings: Settings
) -> Tally:
    """Each request on a fresh catalog of its tool and `size` - 1 others, and on one of
    `size` tools of other apps only."""
    draw = random.Random(f"{seed}:{size}")
    tally = Tally(f"{size} tools", size)
    names = sorted(tools)
    fits: list[float] = []
    for request in requests:
        tool = tools[request.tool]
        others = [n for n in names if n != tool.name]
        offered = [tool, *(tools[n] for n in draw.sample(others, size - 1))]
        started = time.perf_counter()
        async with Catalog(offered, settings) as catalog:
            fits.append(time.perf_counter() - started)
            went, ranked = await catalog.ask(request.query, tally)
        _count(tally, request, tool, went, ranked)
        elsewhere = [n for n in names if tools[n].app != tool.app]
        async with Catalog([tools[n] for n in draw.sample(elsewhere, size)], settings) as catalog:
            went, _ = await catalog.ask(request.query, tally)
        tally.irrelevant += 1
        tally.irrelevant_refused += went is None
    tally.seconds_per_fit = statistics.median(fits) if fits else 0.0
    return tally


async def large_catalog(
    tools: dict[str, Tool], requests: list[Request], settings: Settings
) -> Tally:
    """Every request on one catalog of every tool."""
    tally = Tally(f"{len(tools)} tools", len(tools))
    started = time.perf_counter()
    async with Catalog(list(tools.values()), settings) as catalog:
        tally.seconds_per_fit = time.perf_counter() - started
        for request in requests:
            went, ranked = await catalog.ask(request.query, tally)
            _count(tally, request, tools[request.tool], went, ranked)
    return tally


def table(tallies: list[Tally]) -> str:
    head = (
        f"{'catalogs':<12}{'requests':>9}{'routed right':>14}{'refused':>10}{'wrong':>9}"
        f"{'ranked 1st':>12}{'in top 5':>10}{'no tool fits: refused':>23}{'fit s':>7}"
    )
    rows = [head]
    for t in tallies:
        irrelevant = (
            f"{t.percent(t.irrelevant_refused, t.irrelevant)} of {t.irrelevant}"
            if t.irrelevant
            else "-"
        )
        rows.append(
            f"{t.label:<12}{t.in_scope:>9}{t.percent(t.routed_right, t.in_scope):>14}"
            f"{t.percent(t.refused, t.in_scope):>10}{t.percent(t.routed_wrong, t.in_scope):>9}"
            f"{t.percent(t.ranked_first, t.in_scope):>12}{t.percent(t.in_top5, t.in_scope):>10}"
            f"{irrelevant:>23}{t.seconds_per_fit:>7.2f}"
        )
    return "\n".join(rows)


def of_split(requests: list[Request], split: str) -> list[Request]:
    """The requests of `split` (`dev`, `test`: a half by a hash of the text; `all`)."""
    if split == "all":
        return requests
    from tool_catalogs import in_split  # beside this file: the script's folder is on sys.path

    return [r for r in requests if in_split(r.query, split)]


async def run(data: Path, sizes: list[int], seed: int, split: str = "all") -> list[Tally]:
    tools, requests = load(data / "hammerbench")
    requests = of_split(requests, split)
    if not requests:
        raise SystemExit(f"no request whose tool is in the catalog under {data / 'hammerbench'}")
    print(
        f"{len(tools)} tools in {len({t.app for t in tools.values()})} apps, "
        f"{len(requests)} requests ({split}) to {len({r.tool for r in requests})} of them"
    )
    settings = Settings()
    tallies = []
    for size in sizes:
        tallies.append(await small_catalogs(tools, requests, size, seed, settings))
        print(table(tallies[-1:]).splitlines()[-1], flush=True)
    tallies.append(await large_catalog(tools, requests, settings))
    for tally in tallies:
        print(f"{tally.label}: texts matched by encoder {tally.encoders}")
    return tallies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--split", choices=["dev", "test", "all"], default="all")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--json", type=Path, help="also write the tallies here")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    tallies = asyncio.run(run(args.data, sizes, args.seed, args.split))
    print(table(tallies))
    if args.json:
        args.json.write_text(json.dumps([asdict(t) for t in tallies], ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
