"""The statements of a text decision are true as printed: every `x ≥ y` has x ≥ y and
every `x < y` has x < y, in the printed numbers and in the real ones."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from agent_reach.routing.explanation import compared, threshold_checks

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
COMPARISON = re.compile(r"(-?\d+(?:\.\d+)?(?:e-?\d+)?) ([≥<]) (-?\d+(?:\.\d+)?(?:e-?\d+)?)")


def comparisons(statement: str) -> list[tuple[float, str, float]]:
    return [(float(a), rel, float(b)) for a, rel, b in COMPARISON.findall(statement)]


def holds(a: float, relation: str, b: float) -> bool:
    return a >= b if relation == "≥" else a < b


@given(unit, unit)
def test_a_printed_comparison_holds_for_the_printed_and_the_real_numbers(
    value: float, threshold: float
) -> None:
    shown, relation, limit = compared(value, threshold)
    assert holds(float(shown), relation, float(limit))
    assert holds(value, relation, threshold)


@given(unit, st.one_of(st.none(), unit), unit, unit)
def test_every_statement_states_the_comparison_that_held(
    best: float, gap: float | None, floor: float, margin: float
) -> None:
    checks = threshold_checks(best, gap, min_confidence=floor, margin=margin)
    assert [c.name for c in checks] == ["min_confidence", "margin"]
    for check in checks:
        found = comparisons(check.statement)
        if check.value is None:
            assert found == []
            continue
        [(a, relation, b)] = found
        assert holds(a, relation, b), check.statement
        assert holds(check.value, relation, check.threshold), check.statement
        assert (relation == "≥") == check.passed


def test_a_refusal_by_the_margin_says_so_with_the_numbers_that_decided() -> None:
    floor, margin = threshold_checks(0.81, 0.057, min_confidence=0.5, margin=0.15)
    assert floor.statement == "best confidence 0.810 ≥ 0.5 (min_confidence): confident enough"
    assert margin.statement == (
        "gap to the next capability 0.057 < 0.15 (margin): refused by the margin rule"
    )
    assert (margin.passed, margin.reached) == (False, True)


def test_a_value_just_under_its_threshold_is_printed_with_the_decimals_that_show_it() -> None:
    _, margin = threshold_checks(0.9, 0.1499996, min_confidence=0.5, margin=0.15)
    assert "0.1499996 < 0.15" in margin.statement


def test_below_the_floor_the_margin_is_not_reached() -> None:
    floor, margin = threshold_checks(0.09, 0.3, min_confidence=0.5, margin=0.15)
    assert floor.statement.startswith("best confidence 0.090 < 0.5 (min_confidence): refused")
    assert margin.reached is False
    assert "not reached" in margin.statement


def test_a_learned_example_or_no_match_at_all_has_no_threshold() -> None:
    assert threshold_checks(1.0, 0.0, min_confidence=0.5, margin=0.15, learned=True) == []
    assert threshold_checks(None, None, min_confidence=0.5, margin=0.15) == []
