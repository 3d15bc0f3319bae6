"""bench/routing.py scores the test splits by default and the development splits on ask."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "bench" / "routing.py"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    full = {
        "train": [["book a flight", "book_flight"], ["play a song", "play_music"]],
        "val": [["fly me to rome", "book_flight"]],
        "oos_val": [["what is love", "oos"]],
        "test": [["a flight to oslo", "book_flight"]],
        "oos_test": [["how tall am i", "oos"]],
    }
    (tmp_path / "clinc150").mkdir()
    (tmp_path / "clinc150" / "data_full.json").write_text(json.dumps(full), encoding="utf-8")
    root = tmp_path / "smp2017-ecdt-task1"
    for split in ("train", "develop", "test"):
        (root / split).mkdir(parents=True)
        for n in range(5):  # five labels: one (a fifth) is left unregistered
            text = f"{split} text of label {n}\n"
            (root / split / f"{split}_label{n}.txt").write_text(text, encoding="utf-8")
    return tmp_path


def test_dev_scores_the_development_splits_and_reads_no_test_label(bench, data):
    test, dev = bench.load_clinc(data), bench.load_clinc(data, "dev")
    assert test.test == [("a flight to oslo", "book_flight"), ("how tall am i", bench.OOS)]
    assert dev.test == [("fly me to rome", "book_flight"), ("what is love", bench.OOS)]
    assert dev.unseen == ["a flight to oslo", "how tall am i"]  # throughput only
    assert test.unseen == ["fly me to rome", "what is love"]
    assert dev.train == test.train


def test_dev_leaves_the_same_smp2017_labels_unregistered(bench, data):
    test, dev = bench.load_smp(data), bench.load_smp(data, "dev")
    assert test.train == dev.train and len(test.train) == 4
    unregistered = {f"label{t.split()[-1]}" for t, lab in test.test if lab == bench.OOS}
    assert unregistered == {f"label{t.split()[-1]}" for t, lab in dev.test if lab == bench.OOS}
    assert len(unregistered) == 1 and all(t.startswith("develop") for t, _ in dev.test)
    assert unregistered.isdisjoint(lab for _, lab in test.train)


def test_ceiling_is_the_best_threshold_at_the_recall_asked(bench):
    labels = ["a", "a", "b", bench.OOS, bench.OOS, bench.OOS, bench.OOS]
    best = [("a", 0.9), ("a", 0.3), ("a", 0.8), (None, 0.0), ("a", 0.2), ("b", 0.5), ("a", 0.85)]
    # Refusing 3 of 4 out-of-scope texts needs t above 0.5: routes "a" at 0.9 (right) and
    # "b"'s text at 0.8 (wrong capability): 1 of 3 in-scope texts right.
    assert bench.ceiling(best, labels, 0.75) == pytest.approx(1 / 3)
    # Half of them: t just above 0.2 also routes 0.3 rightly.
    assert bench.ceiling(best, labels, 0.5) == pytest.approx(2 / 3)
    # All of them: t above 0.85 keeps only the 0.9.
    assert bench.ceiling(best, labels, 1.0) == pytest.approx(1 / 3)
    assert bench.ceiling(best, labels, 0.0) == pytest.approx(2 / 3)  # nothing refused


def test_best_candidate_reads_refused_decisions_too(bench):
    refused = {
        "capability": None,
        "rule": "margin",
        "candidates": [
            {"capability": "x", "factors": {"match": 0.41}},
            {"capability": "y", "factors": {"match": 0.47}},
        ],
    }
    assert bench.best_candidate(refused) == ("y", 0.47)
    assert bench.best_candidate({"capability": None, "candidates": []}) == (None, 0.0)
