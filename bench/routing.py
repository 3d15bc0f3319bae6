"""Text routing out of the box: accuracy, refusals and speed on public intent corpora.

    .venv/bin/python bench/routing.py --data DIR [--corpus clinc150|smp2017|all]
        [--k 3,10,30] [--split test|dev] [--policy FILE] [--corrections 600,1500]
        [--scale 1000] [--refits 3] [--encoder URL --model NAME [--encoder-timeout S]]
        [--json out.json]
    .venv/bin/python bench/routing.py --mode tools --data DIR [--split test|dev]
        [--catalogs 60] [--json out.json]

`--mode tools` routes requests to tools known only by their docs (per-request small
catalogs, one big catalog, requests no offered tool fits): bench/tool_catalogs.py says how,
and which corpora it reads under `--data` (MetaTool's `metatool/`).

`--data` is a folder holding `clinc150/data_full.json` (github.com/clinc/oos-eval) and
`smp2017-ecdt-task1/{train,develop,test}/` (the SMP2017-ECDT task-1 files). Protocol, fixed
before any figure was seen:

- A real coordinator (`python -m agent_reach serve`, memory backend, the default policy
  unless `--policy` names one) pinned to one core; the benchmark client on another.
- Each intent becomes a capability registered through `POST /v1/agents`: its tag, its
  name as the description, and k training utterances (k in {3, 10, 30}, a fixed sample).
- Out of scope: CLINC150's own out-of-scope test split; SMP2017 has none, so a fifth of its
  labels (a fixed sample) is left unregistered and their test texts are "no agent for this".
- Every test text goes through `POST /v1/route`. A refusal (`no_match`, `margin`) is right
  for an out-of-scope text and wrong for an in-scope one. Nothing is tuned on any corpus:
  the thresholds are the policy's defaults, applied to confidences the coordinator
  calibrated on the registered cards alone.
- `--split dev` scores the development splits instead (CLINC150 `val` + `oos_val`,
  SMP2017 `develop`, the same labels unregistered), with the same protocol: the split the
  constants in `src/agent_reach/routing` are chosen on. Its throughput texts are the test
  split's (their labels unread), since the scored texts are cached by then.
- Speed: decision latency one text at a time (p50/p99, client-measured, HTTP included);
  texts/s at 32 concurrent requests on texts not seen before (uncached) and the same
  texts again (cached), and the uncached texts per CPU second of the coordinator (its
  user + system time over the run: the machine may be shared, CPU time is not).
- Ceiling: what any refusal threshold on this router's scores could reach at most. Each
  test text's best candidate (capability and calibrated confidence) is read off its
  decision, refused or not; the ceiling is the highest in-scope accuracy that routing to
  the best candidate when its confidence reaches a threshold t, and refusing otherwise,
  gives at the goal's out-of-scope recall, t chosen on the scored split itself. It is an
  analysis figure, never a setting: it tells a threshold problem (the ceiling meets the
  goal, the default policy does not) from a model problem (not even the ceiling does).
- Encoder (`--encoder URL --model NAME`): the coordinator's embedding matcher uses that
  OpenAI-compatible embeddings service (AR_EMBEDDING_URL, AR_EMBEDDING_MODEL) instead of
  the packaged encoder; the decision latency then includes the call for the text, and
  "calibrated s" the catalog's embedding calls. The service runs beside the benchmark
  client, not on the coordinator's core.
- Cost: the coordinator's RSS, the time from its start to the first decision that used
  the sentence encoder, and to every matcher calibrated.
- Scale (`--scale N`, CLINC150): N capabilities of 10 examples each (CLINC150's intents,
  each split into N/150 siblings with their own training texts), registered at once: the
  seconds until every matcher is calibrated and the decision p50 on 300 test texts.
- Corrections (`--corrections N[,M...]`, each corpus at k=3): N other training texts are
  routed, twice, on two fresh coordinators (for each N: 600 routed texts get ~140
  corrections, 1,500 a few hundred). Corrections only: each text routed wrong (or refused)
  gets `POST /v1/feedback` with its right capability. All labelled: every text gets it,
  the ones routed right too (a reviewer who labels an hour of traffic labels every text;
  feedback naming the capability that served confirms it). The test split is routed
  before and again once the router has refitted.
- Refits (`--refits N`, CLINC150 at each k): N corrections one at a time, each waited on
  until every matcher is calibrated again: the coordinator's CPU seconds and the wall
  seconds a correction costs (medians).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
from rich.console import Console
from rich.table import Table

from agent_reach.testing.agent_process import CoordinatorProcess
from agent_reach.wire.pool import HttpPool

SEED = 20_240_601  # the fixed samples: k examples per intent, SMP2017's unregistered labels
OOS = "oos"
KS = (3, 10, 30)
UNREGISTERED_SHARE = 0.2  # SMP2017: a fifth of the labels has no agent
CONCURRENCY = 32
READY_TIMEOUT_S = 900.0  # fitting and calibrating 4,500 examples on a busy core
PROBE_TEXT = "hello"
STALE_WAIT_S = 3.0  # --refits: a correction makes the fit stale within this long
SCALE_EXAMPLES = 10  # --scale: examples per capability
SCALE_TEXTS = 300  # --scale: test texts routed one at a time
GOALS = {30: (0.85, 0.80), 3: (0.70, 0.70)}  # k -> in-scope accuracy, out-of-scope recall


@dataclass(slots=True)
class Corpus:
    name: str
    train: list[tuple[str, str]]
    unseen: list[str]  # texts for the throughput figures (the validation split)
    test: list[tuple[str, str]]  # label OOS for out of scope


@dataclass(slots=True)
class Result:
    corpus: str
    k: int
    capabilities: int
    in_scope_accuracy: float
    oos_recall: float
    precision: float
    coverage: float
    p50_ms: float
    p99_ms: float
    uncached_per_s: float
    uncached_per_cpu_s: float
    cached_per_s: float
    first_embedded_s: float
    calibrated_s: float
    rss_mb: float
    expected: dict[str, Any]
    ceiling: float  # in-scope accuracy of the best threshold at the goal's recall
    encoder: str = "packaged"  # which encoder served the scored texts
    encoder_share: float = 1.0  # ... of which it embedded this share (the rest: packaged)


def load_clinc(data: Path, split: str = "test") -> Corpus:
    full = json.loads((data / "clinc150" / "data_full.json").read_text(encoding="utf-8"))
    test = [(t, lab) for t, lab in full["test"]] + [(t, OOS) for t, _ in full["oos_test"]]
    dev = [(t, lab) for t, lab in full["val"]] + [(t, OOS) for t, _ in full["oos_val"]]
    scored, unseen = (dev, test) if split == "dev" else (test, dev)
    train = [(t, lab) for t, lab in full["train"]]
    return Corpus("clinc150", train, [t for t, _ in unseen], scored)


def load_smp(data: Path, split: str = "test") -> Corpus:
    root = data / "smp2017-ecdt-task1"

    def rows(split: str) -> list[tuple[str, str]]:
        out = []
        for path in sorted((root / split).glob(f"{split}_*.txt")):
            label = path.stem.removeprefix(f"{split}_")
            lines = path.read_text(encoding="utf-8-sig").splitlines()
            out += [(line.strip(), label) for line in lines if line.strip()]
        return out

    train = rows("train")
    labels = sorted({lab for _, lab in train})
    rng = random.Random(SEED)
    unregistered = set(rng.sample(labels, round(len(labels) * UNREGISTERED_SHARE)))
    test = [(t, OOS if lab in unregistered else lab) for t, lab in rows("test")]
    dev = [(t, OOS if lab in unregistered else lab) for t, lab in rows("develop")]
    scored, unseen = (dev, test) if split == "dev" else (test, dev)
    kept = [(t, lab) for t, lab in train if lab not in unregistered]
    return Corpus("smp2017", kept, [t for t, _ in unseen], scored)


def sample(train: list[tuple[str, str]], k: int) -> dict[str, list[str]]:
    """k training utterances per intent (all of them when it has fewer)."""
    by_label: dict[str, list[str]] = {}
    for text, label in train:
        by_label.setdefault(label, []).append(text)
    rng = random.Random(SEED)
    return {label: rng.sample(texts, min(k, len(texts))) for label, texts in by_label.items()}


def tag_of(label: str) -> str:
    return re.sub(r"[^a-z0-9_.-]", "_", label.lower())


# -- the coordinator ----------------------------------------------------------------------


class Coordinator:
    """A coordinator process pinned to one core, and a client for it on the others."""

    def __init__(
        self, directory: Path, policy: Path | None, encoder: dict[str, str] | None = None
    ) -> None:
        cores = sorted(os.sched_getaffinity(0))
        self.core = cores[0]
        os.sched_setaffinity(0, {self.core})  # the child inherits one core...
        self.started = time.perf_counter()
        self.process = CoordinatorProcess(
            directory=directory,
            policy_file=policy,
            probe_interval_s=3600,  # the cards' endpoints are never called
            extra_env={"AR_AUTH": "off", **(encoder or {})},
        ).start()
        os.sched_setaffinity(0, set(cores[1:]) or {self.core})  # ...the client keeps the rest
        self.http = httpx.AsyncClient(base_url=self.process.url, timeout=60)
        self.pool = HttpPool(max_connections_per_origin=CONCURRENCY)  # the fast client
        self.route_url = f"{self.process.url}/v1/route"

    async def register(self, examples: dict[str, list[str]]) -> None:
        for label, said in examples.items():
            body = {
                "id": f"{tag_of(label)}-1",
                "capabilities": [tag_of(label)],
                "description": label.replace("_", " "),
                "examples": said,
                "ttl": 86_400,
                "transport": {"endpoint": f"http://127.0.0.1:9/{tag_of(label)}"},
            }
            response = await self.http.post("/v1/agents", json=body)
            response.raise_for_status()

    async def first_embedded_s(self, encoder: str = "packaged") -> float:
        """Seconds from the coordinator's start to a decision that used the encoder."""
        while True:
            decision = (await self.http.post("/v1/route", json={"text": PROBE_TEXT})).json()
            text = decision.get("text") or {}
            if "embedding" in text.get("matchers", []) and text.get("encoder") == encoder:
                return time.perf_counter() - self.started
            await asyncio.sleep(0.05)

    async def ready_s(self) -> float:
        """Seconds from the coordinator's start until every matcher is calibrated."""
        deadline = time.perf_counter() + READY_TIMEOUT_S
        while time.perf_counter() < deadline:
            matching = (await self.http.get("/v1/policy")).json()["matching"]
            if matching["current"]:
                return time.perf_counter() - self.started
            await asyncio.sleep(0.2)
        raise TimeoutError("the coordinator did not finish calibrating")

    async def refitted(self) -> None:
        """Wait until the catalog a correction changed is fitted and calibrated again (the
        fit goes stale within STALE_WAIT_S of the correction, then current again)."""
        started = time.perf_counter()
        stale = False
        while time.perf_counter() - started < READY_TIMEOUT_S:
            current = await self._current()
            if current and (stale or time.perf_counter() - started > STALE_WAIT_S):
                return
            stale = stale or not current
            await asyncio.sleep(0.05)
        raise TimeoutError("the coordinator did not refit after a correction")

    async def _current(self) -> bool:
        matching = (await self.http.get("/v1/policy")).json()["matching"]
        return bool(matching["current"])

    async def route(self, text: str, request_id: str | None = None) -> dict[str, Any]:
        body = {"text": text} | ({"request_id": request_id} if request_id else {})
        response = await self.pool.request(
            "POST",
            self.route_url,
            headers=[("content-type", "application/json")],
            body=orjson.dumps(body),
            timeout_s=60,
        )
        if response.status != 200:
            raise RuntimeError(f"route answered {response.status}: {response.body[:200]!r}")
        decision: dict[str, Any] = orjson.loads(response.body)
        return decision

    async def expected(self, remote: bool = False) -> dict[str, Any]:
        """What the calibration in force expects; `remote`: the remote encoder's."""
        view = (await self.http.get("/v1/routing/calibration")).json()
        ready = view["matching"]["ready"]
        if remote:
            ready = ["embedding:remote" if m == "embedding" else m for m in ready]
        fits = [c for c in view["calibrations"] if c["matchers"] == ready]
        return fits[0]["expected"] or {} if fits else {}

    def cpu_s(self) -> float:
        """User + system CPU seconds the coordinator process has used."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]

    async def aclose(self) -> None:
        await self.http.aclose()
        await self.pool.aclose()
        self.process.stop()


# -- measuring ----------------------------------------------------------------------------


def score(choices: Sequence[str | None], labels: Sequence[str]) -> dict[str, float]:
    """In-scope accuracy, out-of-scope recall, and precision at the coverage reached."""
    ins = [(c, lab) for c, lab in zip(choices, labels, strict=True) if lab != OOS]
    oos = [c for c, lab in zip(choices, labels, strict=True) if lab == OOS]
    routed = [(c, lab) for c, lab in zip(choices, labels, strict=True) if c is not None]
    return {
        "in_scope_accuracy": sum(c == tag_of(lab) for c, lab in ins) / len(ins),
        "oos_recall": sum(c is None for c in oos) / len(oos) if oos else float("nan"),
        "precision": sum(c == tag_of(lab) for c, lab in routed) / len(routed) if routed else 1.0,
        "coverage": len(routed) / len(labels),
    }


Best = tuple[str | None, float]  # a decision's best candidate: capability, confidence


async def sequential(
    coordinator: Coordinator, texts: list[str]
) -> tuple[list[str | None], list[float], list[Best], list[str]]:
    """Each text's chosen capability (None: refused), the latencies, the best candidates,
    and the encoder that served each."""
    choices, latencies, best, served = [], [], [], []
    for text in texts:
        start = time.perf_counter()
        decision = await coordinator.route(text)
        latencies.append(time.perf_counter() - start)
        choices.append(decision["capability"])
        best.append(best_candidate(decision))
        served.append((decision.get("text") or {}).get("encoder") or "none")
    return choices, latencies, best, served


def ceiling_recall(k: int) -> float:
    """The out-of-scope recall a ceiling is taken at: k's goal, else the k=30 goal's."""
    return GOALS.get(k, GOALS[30])[1]


def best_candidate(decision: dict[str, Any]) -> Best:
    """The capability with the highest calibrated match confidence, chosen or refused."""
    candidates = [c for c in decision.get("candidates") or [] if c.get("capability")]
    if not candidates:
        return None, 0.0
    top = max(candidates, key=lambda c: c["factors"]["match"])
    return top["capability"], float(top["factors"]["match"])


def ceiling(best: Sequence[Best], labels: Sequence[str], oos_recall: float) -> float:
    """The highest in-scope accuracy of "route to the best candidate when its confidence
    reaches t, else refuse" over every t whose out-of-scope recall reaches `oos_recall`."""
    ins = [
        (conf, cap == tag_of(lab))
        for (cap, conf), lab in zip(best, labels, strict=True)
        if lab != OOS
    ]
    oos = sorted(conf for (_, conf), lab in zip(best, labels, strict=True) if lab == OOS)
    if not ins:
        return 0.0
    # The lowest t that refuses enough out-of-scope texts routes the most in-scope ones:
    # just above the confidence of the last one it must refuse.
    needed = math.ceil(oos_recall * len(oos) - 1e-9)
    t = math.nextafter(oos[needed - 1], math.inf) if needed else -math.inf
    return sum(right and conf >= t for conf, right in ins) / len(ins)


async def rate(coordinator: Coordinator, texts: list[str]) -> float:
    limit = asyncio.Semaphore(CONCURRENCY)

    async def one(text: str) -> None:
        async with limit:
            await coordinator.route(text)

    start = time.perf_counter()
    await asyncio.gather(*(one(t) for t in texts))
    return len(texts) / (time.perf_counter() - start)


def percentiles_ms(latencies: list[float]) -> tuple[float, float]:
    ordered = sorted(latencies)
    return ordered[len(ordered) // 2] * 1e3, ordered[int(len(ordered) * 0.99)] * 1e3


def encoder_env(
    url: str | None, model: str | None, timeout_s: float | None = None
) -> dict[str, str] | None:
    """The coordinator's settings for `--encoder URL --model NAME` (None: packaged)."""
    if not url:
        return None
    env = {"AR_EMBEDDING_URL": url} | ({"AR_EMBEDDING_MODEL": model} if model else {})
    return env | ({"AR_EMBEDDING_TIMEOUT_S": str(timeout_s)} if timeout_s else {})


def encoder_label(encoder: dict[str, str] | None) -> str:
    """How decisions name the encoder that `encoder_env` sets."""
    if not encoder:
        return "packaged"
    return f"remote:{encoder.get('AR_EMBEDDING_MODEL', 'text-embedding-3-small')}"


async def run(
    corpus: Corpus,
    k: int,
    policy: Path | None,
    console: Console,
    encoder: dict[str, str] | None = None,
) -> Result:
    examples = sample(corpus.train, k)
    label = encoder_label(encoder)
    with tempfile.TemporaryDirectory() as directory:
        coordinator = Coordinator(Path(directory), policy, encoder)
        try:
            await coordinator.register(examples)
            first = await coordinator.first_embedded_s(label)
            ready = await coordinator.ready_s()
            texts, labels = [t for t, _ in corpus.test], [lab for _, lab in corpus.test]
            choices, latencies, best, served = await sequential(coordinator, texts)
            cpu = coordinator.cpu_s()
            uncached = await rate(coordinator, corpus.unseen)
            per_cpu_s = len(corpus.unseen) / max(coordinator.cpu_s() - cpu, 1e-9)
            cached = await rate(coordinator, corpus.unseen)
            expected = await coordinator.expected(remote=encoder is not None)
            rss = coordinator.rss_mb()
        finally:
            await coordinator.aclose()
    figures = score(choices, labels)
    console.log(f"{corpus.name} k={k} ({label}): {figures}")
    share = served.count(label) / len(served) if served else 1.0
    if share < 1:
        console.log(f"{1 - share:.1%} of the texts were not embedded by {label}")
    return Result(
        corpus.name,
        k,
        len(examples),
        **figures,
        p50_ms=percentiles_ms(latencies)[0],
        p99_ms=percentiles_ms(latencies)[1],
        uncached_per_s=uncached,
        uncached_per_cpu_s=per_cpu_s,
        cached_per_s=cached,
        first_embedded_s=first,
        calibrated_s=ready,
        rss_mb=rss,
        expected=expected,
        ceiling=ceiling(best, labels, ceiling_recall(k)),
        encoder=label,
        encoder_share=share,
    )


def siblings(train: list[tuple[str, str]], n: int) -> dict[str, list[str]]:
    """n capabilities of SCALE_EXAMPLES texts: each intent split into n / intents parts."""
    by_label: dict[str, list[str]] = {}
    for text, label in train:
        by_label.setdefault(label, []).append(text)
    labels = sorted(by_label)
    rng = random.Random(SEED)
    pools = {label: rng.sample(texts, len(texts)) for label, texts in by_label.items()}
    out: dict[str, list[str]] = {}
    for i in range(n):
        label = labels[i % len(labels)]
        part = i // len(labels)
        said = pools[label][part * SCALE_EXAMPLES : (part + 1) * SCALE_EXAMPLES]
        out[f"{label}.{part}"] = said or pools[label][:SCALE_EXAMPLES]
    return out


async def scale(corpus: Corpus, n: int, policy: Path | None) -> dict[str, Any]:
    """Calibration time and decision latency with n registered capabilities."""
    examples = siblings(corpus.train, n)
    texts = [t for t, _ in random.Random(SEED).sample(corpus.test, SCALE_TEXTS)]
    with tempfile.TemporaryDirectory() as directory:
        coordinator = Coordinator(Path(directory), policy)
        try:
            await coordinator.ready_s()  # the empty catalog, so the clock starts at the cards
            await coordinator.register(examples)
            registered = time.perf_counter()
            cpu = coordinator.cpu_s()
            await coordinator.first_embedded_s()
            await coordinator.ready_s()
            fit_s, fit_cpu_s = time.perf_counter() - registered, coordinator.cpu_s() - cpu
            _, latencies, _, _ = await sequential(coordinator, texts)
            rss = coordinator.rss_mb()
        finally:
            await coordinator.aclose()
    p50, p99 = percentiles_ms(latencies)
    return {
        "capabilities": n,
        "examples": sum(map(len, examples.values())),
        "calibrated_s": fit_s,
        "calibration_cpu_s": fit_cpu_s,
        "p50_ms": p50,
        "p99_ms": p99,
        "rss_mb": rss,
    }


async def corrections(
    corpus: Corpus, n: int, policy: Path | None, *, confirm: bool
) -> dict[str, Any]:
    """Accuracy on the test split before and after feedback on N other texts (k=3): on the
    ones routed wrong only, or (`confirm`) on every one of them."""
    examples = sample(corpus.train, 3)
    used = {t for said in examples.values() for t in said}
    others = [(t, lab) for t, lab in corpus.train if t not in used]
    taught = random.Random(SEED).sample(others, n)
    texts, labels = [t for t, _ in corpus.test], [lab for _, lab in corpus.test]
    with tempfile.TemporaryDirectory() as directory:
        coordinator = Coordinator(Path(directory), policy)
        try:
            await coordinator.register(examples)
            await coordinator.ready_s()
            before = score((await sequential(coordinator, texts))[0], labels)
            corrected = confirmed = 0
            for i, (text, label) in enumerate(taught):
                decision = await coordinator.route(text, request_id=f"teach-{i}")
                right = decision["capability"] == tag_of(label)
                if right and not confirm:
                    continue
                body = {"request_id": f"teach-{i}", "capability": tag_of(label)}
                (await coordinator.http.post("/v1/feedback", json=body)).raise_for_status()
                if right:
                    confirmed += 1
                else:
                    corrected += 1
            await coordinator.ready_s()
            after = score((await sequential(coordinator, texts))[0], labels)
        finally:
            await coordinator.aclose()
    return {
        "corpus": corpus.name,
        "k": 3,
        "texts": n,
        "feedback": "all labelled" if confirm else "corrections only",
        "corrected": corrected,
        "confirmed": confirmed,
        "before": before,
        "after": after,
    }


async def refit_cost(corpus: Corpus, k: int, n: int, policy: Path | None) -> dict[str, Any]:
    """What one correction costs the coordinator: the refit and recalibration it causes,
    CPU and wall seconds (medians of N corrections made one at a time)."""
    examples = sample(corpus.train, k)
    used = {t for said in examples.values() for t in said}
    others = [(t, lab) for t, lab in corpus.train if t not in used]
    taught = random.Random(SEED).sample(others, n)
    cpu: list[float] = []
    wall: list[float] = []
    with tempfile.TemporaryDirectory() as directory:
        coordinator = Coordinator(Path(directory), policy)
        try:
            await coordinator.register(examples)
            await coordinator.ready_s()
            for i, (text, label) in enumerate(taught):
                await coordinator.route(text, request_id=f"refit-{i}")
                cpu_before, started = coordinator.cpu_s(), time.perf_counter()
                body = {"request_id": f"refit-{i}", "capability": tag_of(label)}
                (await coordinator.http.post("/v1/feedback", json=body)).raise_for_status()
                await coordinator.refitted()
                cpu.append(coordinator.cpu_s() - cpu_before)
                wall.append(time.perf_counter() - started)
        finally:
            await coordinator.aclose()
    return {
        "corpus": corpus.name,
        "k": k,
        "corrections": n,
        "cpu_s": statistics.median(cpu),
        "wall_s": statistics.median(wall),
    }


# -- output -------------------------------------------------------------------------------


def show(
    results: list[Result],
    taught: list[dict[str, Any]],
    scaled: dict[str, Any] | None,
    refits: list[dict[str, Any]],
    console: Console,
    split: str = "test",
) -> None:
    title = f"Text routing with the default policy ({split} splits)"
    table = Table(title=title)
    columns = (
        "corpus",
        "encoder",
        "k",
        "caps",
        "in-scope acc",
        "oos recall",
        "precision / coverage",
        "p50 / p99 ms",
        "texts/s uncached / cached",
        "uncached per CPU s",
        "1st embedded s",
        "calibrated s",
        "RSS MB",
        "ceiling",
        "goal",
    )
    for column in columns:
        table.add_column(column)
    for r in results:
        goal = GOALS.get(r.k)
        met = (
            "-"
            if goal is None
            else ("met" if r.in_scope_accuracy >= goal[0] and r.oos_recall >= goal[1] else "missed")
        )
        table.add_row(
            r.corpus,
            r.encoder if r.encoder_share == 1 else f"{r.encoder} ({r.encoder_share:.1%})",
            str(r.k),
            str(r.capabilities),
            f"{r.in_scope_accuracy:.1%}",
            f"{r.oos_recall:.1%}",
            f"{r.precision:.1%} / {r.coverage:.1%}",
            f"{r.p50_ms:.1f} / {r.p99_ms:.1f}",
            f"{r.uncached_per_s:,.0f} / {r.cached_per_s:,.0f}",
            f"{r.uncached_per_cpu_s:,.0f}",
            f"{r.first_embedded_s:.1f}",
            f"{r.calibrated_s:.1f}",
            f"{r.rss_mb:.0f}",
            f"{r.ceiling:.1%}",
            met,
        )
    console.print(table)
    if scaled:
        console.print(
            f"scale: {scaled['capabilities']:,} capabilities ({scaled['examples']:,} examples)"
            f" calibrated {scaled['calibrated_s']:.1f} s after registration"
            f" ({scaled['calibration_cpu_s']:.1f} CPU s); decision p50 / p99"
            f" {scaled['p50_ms']:.1f} / {scaled['p99_ms']:.1f} ms; RSS {scaled['rss_mb']:.0f} MB"
        )
    for run_ in taught:
        b, a = run_["before"], run_["after"]
        console.print(
            f"feedback, {run_['feedback']} ({run_['corpus']}, k=3, {run_['texts']} other"
            f" texts): {run_['corrected']} corrected, {run_['confirmed']} confirmed; in-scope"
            f" accuracy {b['in_scope_accuracy']:.1%} -> {a['in_scope_accuracy']:.1%}"
            f" ({(a['in_scope_accuracy'] - b['in_scope_accuracy']) * 100:+.1f} points),"
            f" out-of-scope recall {b['oos_recall']:.1%} -> {a['oos_recall']:.1%}"
        )
    for cost in refits:
        console.print(
            f"a correction ({cost['corpus']}, k={cost['k']}, median of {cost['corrections']}):"
            f" refit and recalibrated in {cost['wall_s']:.1f} s, {cost['cpu_s']:.1f} CPU s"
        )


async def tools_mode(
    data: Path, split: str, catalogs: int, out: Path | None, console: Console
) -> None:
    """Description-only tool catalogs, in-process on one core (bench/tool_catalogs.py)."""
    import tool_catalogs  # beside this file: the script's own folder is on sys.path
    from agent_reach.config import Settings

    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    rows = []
    for load in tool_catalogs.LOADERS.values():
        corpus = load(data)
        small = await tool_catalogs.small_catalogs(corpus, split, Settings(), catalogs)
        big = await tool_catalogs.big_catalog(corpus, split, Settings())
        rows += [small.summary(), big.summary()]
    table = Table(title=f"Tools known only by their docs ({split} split)")
    columns = ("corpus", "catalogs", "tools", "routed right", "ranked first", "top 5")
    for column in (*columns, "unfit refused", "p50 / p99 ms"):
        table.add_column(column)
    for r in rows:
        table.add_row(
            r["corpus"] + " " + r["mode"],
            str(r["catalogs"]),
            str(r["tools"]),
            f"{r['routed_right']:.1%} of {r['in_scope']}",
            f"{r['ranked_first']:.1%}",
            f"{r['top5']:.1%}",
            f"{r['unfit_refused']:.1%} of {r['unfit']}",
            f"{r['p50_ms']:.1f} / {r['p99_ms']:.1f}",
        )
    console.print(table)
    if out:
        text = json.dumps(rows, indent=2, ensure_ascii=False)
        await asyncio.to_thread(out.write_text, text, encoding="utf-8")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="folder of the corpora")
    parser.add_argument("--corpus", choices=["clinc150", "smp2017", "all"], default="all")
    parser.add_argument("--k", default=",".join(map(str, KS)), help="examples per capability")
    parser.add_argument(
        "--split", choices=["test", "dev"], default="test", help="dev: the development splits"
    )
    parser.add_argument("--policy", type=Path, help="a policy file (default: the defaults)")
    parser.add_argument(
        "--corrections", default="600,1500", help="texts routed per run; 0: skip the experiment"
    )
    parser.add_argument("--scale", type=int, default=1000, help="0: skip the scale check")
    parser.add_argument("--refits", type=int, default=3, help="corrections timed per k; 0: skip")
    parser.add_argument("--encoder", help="base URL of an OpenAI-compatible embeddings service")
    parser.add_argument("--model", help="the model to ask it for (with --encoder)")
    parser.add_argument(
        "--encoder-timeout", type=float, help="AR_EMBEDDING_TIMEOUT_S (default: the setting's)"
    )
    parser.add_argument("--json", type=Path)
    parser.add_argument("--mode", choices=["intents", "tools"], default="intents")
    parser.add_argument("--catalogs", type=int, default=60, help="--mode tools: small catalogs")
    args = parser.parse_args()
    console = Console(width=200)
    if args.mode == "tools":
        await tools_mode(args.data, args.split, args.catalogs, args.json, console)
        return
    loaders = {"clinc150": load_clinc, "smp2017": load_smp}
    names = list(loaders) if args.corpus == "all" else [args.corpus]
    corpora = {name: loaders[name](args.data, args.split) for name in names}
    ks = [int(k) for k in args.k.split(",") if int(k) > 0]  # --k 0: the corrections only
    encoder = encoder_env(args.encoder, args.model, args.encoder_timeout)
    results = [
        await run(corpus, k, args.policy, console, encoder)
        for corpus in corpora.values()
        for k in ks
    ]
    taught: list[dict[str, Any]] = []
    for corpus in corpora.values():
        for n in (int(n) for n in args.corrections.split(",") if int(n) > 0):
            for confirm in (False, True):
                taught.append(await corrections(corpus, n, args.policy, confirm=confirm))
    scaled = None
    if args.scale and "clinc150" in corpora:
        scaled = await scale(corpora["clinc150"], args.scale, args.policy)
    refits = []
    if args.refits and "clinc150" in corpora:
        refits = [await refit_cost(corpora["clinc150"], k, args.refits, args.policy) for k in ks]
    show(results, taught, scaled, refits, console, args.split)
    if args.json:
        report = {
            "results": [asdict(r) for r in results],
            "corrections": taught,
            "scale": scaled,
            "refits": refits,
        }
        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
        console.print(f"wrote {args.json}")


if __name__ == "__main__":
    asyncio.run(main())
