"""The `report` fixture fails a scenario that records attempts and never judges them
(issue 41: a new attack test that forgot to assert passed silently)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCENARIOS = Path(__file__).with_name("unjudged_scenario.py")


def test_a_scenario_that_records_without_judging_fails() -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(SCENARIOS),
            "-k",
            "memory",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rA",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = run.stdout
    assert run.returncode == 1, out
    # the forgetful body passes, then its teardown errors; the judging one passes
    assert "2 passed, 2 deselected, 1 error" in out, out
    assert "ERROR tests/security/unjudged_scenario.py::test_records_an_attack_and_forgets" in out
    assert "unjudged_probe recorded attempts that the test never judged" in out
    assert "ERROR tests/security/unjudged_scenario.py::test_records_an_attack_and_judges" not in out
