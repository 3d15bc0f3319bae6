"""Two scenarios for `test_report_fixture.py`, run only when it names this file (the
name matches no `test_*.py`): one records an attack and never judges it, which the
`report` fixture must fail; one judges it, which must pass."""

from __future__ import annotations

from attack_kit import ReportFactory


def test_records_an_attack_and_forgets_to_judge_it(report: ReportFactory) -> None:
    attack = report("unjudged_probe", "a scenario that forgets its assertion")
    attack.record("a door left open", through=True)


def test_records_an_attack_and_judges_it(report: ReportFactory) -> None:
    attack = report("judged_probe", "a scenario that asserts")
    attack.record("a door kept shut", through=False)
    attack.assert_nothing_got_through()
