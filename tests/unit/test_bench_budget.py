"""bench/instructions.py's hot-path budget: what exceeds it, and by how much, said with
the numbers; the committed figures are a well-formed record the test command can read."""

from __future__ import annotations

import json
from pathlib import Path

BENCH = Path(__file__).parents[2] / "bench" / "instructions.py"
BUDGET = BENCH.parent / "hot_path_budget.json"


def test_within_the_tolerance_is_within_the_budget(bench):
    budget = {"bytecodes": 1000.0, "frames": 100.0}
    assert bench.over_budget({"bytecodes": 1050.0, "frames": 105.0}, budget) == []


def test_each_figure_over_the_tolerance_is_named_with_its_numbers(bench):
    budget = {"bytecodes": 1000.0, "frames": 100.0}
    failures = bench.over_budget({"bytecodes": 1050.2, "frames": 99.0}, budget)
    assert failures == ["bytecodes: 1,050.2 per request > 1,000.0 committed + 5% (1,050.0)"]
    assert len(bench.over_budget({"bytecodes": 2000.0, "frames": 200.0}, budget)) == 2


def test_the_committed_budget_names_both_figures_and_its_interpreter():
    record = json.loads(BUDGET.read_text())
    assert set(record["per_request"]) == {"bytecodes", "frames"}
    assert all(value > 0 for value in record["per_request"].values())
    assert record["python"].count(".") == 2
