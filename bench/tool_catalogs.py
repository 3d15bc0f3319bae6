"""Tool mode of bench/routing.py: routing user requests to tools known only by their docs.

Public tool-selection data (a request paired with the tool that serves it, tools known by a
name and a description) is routed in-process as the coordinator routes it (the matching
pipeline with the default policy, then the router), on one core:

- small catalogs: SMALL_CATALOGS catalogs of 2-10 tools (as one MCP server offers), each
  asked REQUESTS_PER_TOOL requests of each of its tools (in scope: routed to that tool is
  right) and as many requests of tools it does not hold (unfit: refused is right);
- one big catalog: every tool but a fixed fifth (whose requests are unfit), asked
  BIG_REQUESTS requests; in-scope accuracy, refusals of unfit requests, the right tool
  among the 5 best candidates, and the decision's p50/p99 (match + decide, in-process).

Requests are split into development and test halves by a hash of their text (fixed), and so
are the sampled catalogs (their own seeds): every constant of the router is chosen on
`--split dev`; the figures reported are the test half's.

Corpora, read from `--data DIR` (not in this repository):
- `metatool/`: MetaTool (github.com/HowieHwong/MetaTool, MIT): `tools.json` (199 tools,
  `{name: description}`) and `queries.csv` (`Query,Tool`), English.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import re
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_reach.backends.protocols import InstanceRecord
from agent_reach.clock import ManualClock
from agent_reach.config import Settings
from agent_reach.model.agents import AgentSpec
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.matchers.pipeline import MatchingPipeline
from agent_reach.routing.router import decide

SEED = 20_261_206
SMALL_CATALOGS = 60  # catalogs per split
SMALL_SIZES = (2, 10)  # tools per small catalog, inclusive
REQUESTS_PER_TOOL = 2  # in-scope requests per tool of a small catalog (and as many unfit)
BIG_REQUESTS = 600  # requests routed on the big catalog
UNREGISTERED_SHARE = 0.2  # the big catalog leaves this share of the tools out
TOP_K = 5


@dataclass(slots=True)
class ToolCorpus:
    name: str
    tools: dict[str, str]  # capability tag -> description
    requests: list[tuple[str, str]]  # (text, tag)


@dataclass(slots=True)
class Figures:
    """Routed right among in-scope requests, refused among unfit ones, top-5, latency."""

    corpus: str
    mode: str
    catalogs: int
    tools: int
    in_scope: int = 0
    in_scope_right: int = 0
    unfit: int = 0
    unfit_refused: int = 0
    top5: int = 0
    ranked_first: int = 0
    latencies_ms: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        ordered = sorted(self.latencies_ms) or [0.0]
        return {
            "corpus": self.corpus,
            "mode": self.mode,
            "catalogs": self.catalogs,
            "tools": self.tools,
            "in_scope": self.in_scope,
            "routed_right": self.in_scope_right / max(self.in_scope, 1),
            "ranked_first": self.ranked_first / max(self.in_scope, 1),
            "top5": self.top5 / max(self.in_scope, 1),
            "unfit": self.unfit,
            "unfit_refused": self.unfit_refused / max(self.unfit, 1),
            "p50_ms": statistics.median(ordered),
            "p99_ms": ordered[int(len(ordered) * 0.99)],
        }


def tag_of(name: str) -> str:
    return re.sub(r"[^a-z0-9_.-]", "_", name.lower())[:120].strip("_.-") or "tool"


def load_metatool(data: Path) -> ToolCorpus:
    root = data / "metatool"
    described = json.loads((root / "tools.json").read_text(encoding="utf-8"))
    tools = {tag_of(name): text for name, text in described.items()}
    by_lower = {name.lower(): tag_of(name) for name in described}
    requests = []
    with (root / "queries.csv").open(encoding="utf-8") as rows:
        for row in csv.DictReader(rows):
            tag = by_lower.get(row["Tool"].strip().lower())
            if tag is not None and row["Query"].strip():
                requests.append((row["Query"].strip(), tag))
    return ToolCorpus("metatool", tools, requests)


def in_split(text: str, split: str) -> bool:
    """Half of the requests are development, half test: by a hash of the text."""
    digest = hashlib.sha1(text.encode(), usedforsecurity=False).digest()
    return (digest[0] % 2 == 0) == (split == "dev")


def index_of(tools: dict[str, str]) -> RegistryIndex:
    index = RegistryIndex()
    for tag, description in tools.items():
        spec = AgentSpec(
            id=f"a-{tag}"[:60].rstrip("._-"),
            capabilities=[tag],
            description=description,
            transport={"endpoint": "http://127.0.0.1:9/invoke"},
        )
        index.upsert(InstanceRecord(spec, 0.0), float("inf")).health = "healthy"
    return index


async def route_all(
    tools: dict[str, str],
    asked: list[tuple[str, str | None]],
    figures: Figures,
    settings: Settings,
) -> None:
    """Fit one catalog, route every (text, right tag or None for unfit) and count."""
    index = index_of(tools)
    pipeline = MatchingPipeline(index, ManualClock(), settings)
    policy = Policy()
    try:
        await pipeline.ready(policy)
        for text, right in asked:
            started = time.perf_counter()
            matched = await pipeline.match(text, policy)
            decision = decide(
                matched.matches, index, policy, now=0.0, from_text=True, text=matched.text
            )
            figures.latencies_ms.append((time.perf_counter() - started) * 1e3)
            ranked = [m.capability for m in matched.matches]
            if right is None:
                figures.unfit += 1
                figures.unfit_refused += decision.capability is None
                continue
            figures.in_scope += 1
            figures.in_scope_right += decision.capability == right
            figures.ranked_first += bool(ranked) and ranked[0] == right
            figures.top5 += right in ranked[:TOP_K]
    finally:
        await pipeline.aclose()


async def small_catalogs(
    corpus: ToolCorpus, split: str, settings: Settings, catalogs: int = SMALL_CATALOGS
) -> Figures:
    rng = random.Random(f"{SEED}-{corpus.name}-small-{split}")
    by_tool: dict[str, list[str]] = {}
    for text, tag in corpus.requests:
        if in_split(text, split):
            by_tool.setdefault(tag, []).append(text)
    usable = sorted(t for t in corpus.tools if len(by_tool.get(t, [])) >= REQUESTS_PER_TOOL)
    figures = Figures(corpus.name, "small catalogs", catalogs, 0)
    for _ in range(catalogs):
        size = rng.randint(*SMALL_SIZES)
        held = rng.sample(usable, size)
        asked: list[tuple[str, str | None]] = []
        for tag in held:
            asked += [(t, tag) for t in rng.sample(by_tool[tag], REQUESTS_PER_TOOL)]
        others = [t for t in usable if t not in held]
        for tag in rng.sample(others, min(len(others), size * REQUESTS_PER_TOOL)):
            asked.append((rng.choice(by_tool[tag]), None))
        figures.tools += size
        await route_all({t: corpus.tools[t] for t in held}, asked, figures, settings)
    return figures


async def big_catalog(corpus: ToolCorpus, split: str, settings: Settings) -> Figures:
    rng = random.Random(f"{SEED}-{corpus.name}-big")  # the same catalog for both splits
    tags = sorted(corpus.tools)
    unregistered = set(rng.sample(tags, round(len(tags) * UNREGISTERED_SHARE)))
    registered = {t: d for t, d in corpus.tools.items() if t not in unregistered}
    pool = [(text, tag) for text, tag in corpus.requests if in_split(text, split)]
    chosen = random.Random(f"{SEED}-{corpus.name}-big-{split}").sample(pool, BIG_REQUESTS)
    asked = [(text, None if tag in unregistered else tag) for text, tag in chosen]
    figures = Figures(corpus.name, "one big catalog", 1, len(registered))
    await route_all(registered, asked, figures, settings)
    return figures


LOADERS = {"metatool": load_metatool}
