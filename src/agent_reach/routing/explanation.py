"""What decided a text decision, as statements that are true as printed.

Each threshold the router held a text to becomes one `ThresholdCheck` whose statement
names the comparison that actually held: `gap to the next capability 0.057 < 0.15:
refused by the margin rule`, never `0.057 ≥ 0.15`. Numbers are printed with as many
decimals as it takes for the printed values to compare as the real ones do (0.1499996
against 0.15 reads `0.1499996 < 0.15`, not `0.150 < 0.15`). The route answer, the
decision log, `agent-reach route` and `why`, the A2A face's rejection and the
dashboard all show these statements as they are.

Pure: plain data in, plain data out; the router calls it on every text decision.
"""

from __future__ import annotations

from agent_reach.model.decisions import ThresholdCheck

SHOWN_DECIMALS = 3  # as every other number of a decision is printed
MAX_DECIMALS = 17  # a float's round trip never needs more
GE = "≥"
LT = "<"


def compared(value: float, threshold: float) -> tuple[str, str, str]:
    """`value`, the relation that holds (`≥` or `<`) and `threshold`, printed so that the
    printed numbers compare as the real ones do."""
    relation = GE if value >= threshold else LT
    for decimals in range(SHOWN_DECIMALS, MAX_DECIMALS + 1):
        shown, limit = f"{value:.{decimals}f}", _trimmed(f"{threshold:.{decimals}f}")
        if _holds(float(shown), relation, float(limit)):
            return shown, relation, limit
    return repr(value), relation, repr(threshold)


def threshold_checks(
    best: float | None,
    gap: float | None,
    *,
    min_confidence: float,
    margin: float,
    learned: bool = False,
) -> list[ThresholdCheck]:
    """The floor and the margin rule as the router applied them, in its order: the floor
    first (below it the margin is never reached), then the gap to the next capability.

    `best`: the best capability's confidence (None: nothing matched); `gap`: its lead
    over the next one (None: only one matched). A learned example skips both.
    """
    if learned or best is None:
        return []
    floor_held = best >= min_confidence
    value, relation, limit = compared(best, min_confidence)
    outcome = "confident enough" if floor_held else "refused: no capability fit well enough"
    checks = [
        ThresholdCheck(
            "min_confidence",
            best,
            min_confidence,
            floor_held,
            True,
            f"best confidence {value} {relation} {limit} (min_confidence): {outcome}",
        )
    ]
    if gap is None:
        statement = f"one capability matched: no gap to hold to the margin {margin:g}"
        checks.append(ThresholdCheck("margin", None, margin, True, floor_held, statement))
        return checks
    value, relation, limit = compared(gap, margin)
    held = gap >= margin
    if not floor_held:
        outcome = "not reached (the confidence floor refused first)"
    elif held:
        outcome = "far enough ahead"
    else:
        outcome = "refused by the margin rule"
    checks.append(
        ThresholdCheck(
            "margin",
            gap,
            margin,
            held,
            floor_held,
            f"gap to the next capability {value} {relation} {limit} (margin): {outcome}",
        )
    )
    return checks


def _trimmed(number: str) -> str:
    """`0.150` -> `0.15`, `0.500` -> `0.5`, `1.000` -> `1.0`: a threshold as it was set."""
    whole, _, decimals = number.partition(".")
    return f"{whole}.{decimals.rstrip('0') or '0'}"


def _holds(value: float, relation: str, threshold: float) -> bool:
    return value >= threshold if relation == GE else value < threshold
