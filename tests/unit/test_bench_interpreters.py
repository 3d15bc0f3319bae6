"""bench/interpreters.py: a child coordinator driven a line at a time, and the paired ratio."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "bench" / "interpreters.py"


def test_the_ratio_is_the_median_of_each_rounds_own(bench):
    # the drift moves both figures of a round together; the ratio of medians would be 1.0
    assert bench.paired([100.0, 200.0, 150.0], [90.0, 180.0, 180.0]) == pytest.approx(0.9)


def test_a_child_serves_real_invokes_and_reports_their_cpu(bench):
    with bench.children([sys.executable], 64) as (child,):
        figures = [child.cpu_us_per_request(64) for _ in range(2)]
        assert all(figure > 0 for figure in figures)
        child.close()
        assert child.process.returncode == 0


def test_an_interpreter_that_cannot_serve_is_an_error(bench, tmp_path):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    with pytest.raises(RuntimeError, match="ended early"), bench.children([str(broken)], 64):
        pass
