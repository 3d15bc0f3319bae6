"""bench/quality.py: what a request's answer says, the shares, and the claims checked."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).parents[2] / "bench" / "quality.py"


def _answer(*attempts: tuple[str, int | None], served_by: str | None = "steady") -> dict:
    return {
        "agent_id": served_by,
        "attempts": [{"agent_id": a, "http_status": status} for a, status in attempts],
    }


def test_an_answer_names_the_instance_tried_first_and_whether_it_bounced(bench: ModuleType):
    bounced = bench.outcome_of(200, _answer(("bouncer", 421), ("steady", None)))
    assert (bounced.first, bounced.served_by, bounced.bounced) == ("bouncer", "steady", True)
    plain = bench.outcome_of(200, _answer(("steady", None)))
    assert (plain.first, plain.bounced) == ("steady", False)
    failed = bench.outcome_of(
        421, {"error": {"attempts": [{"agent_id": "bouncer", "http_status": 421}]}}
    )
    assert (failed.status, failed.first, failed.served_by) == (421, "bouncer", None)


def _outcomes(bench: ModuleType, firsts: str) -> list:
    """'bsb...': b, a bounced request served by the sibling; s, the sibling served it."""
    return [
        bench.Outcome(200, "bouncer", "steady", True)
        if f == "b"
        else bench.Outcome(200, "steady", "steady", False)
        for f in firsts
    ]


def test_a_phase_counts_shares_per_block_and_bounces_served_by_the_sibling(bench: ModuleType):
    outcomes = _outcomes(bench, "bs" * 2 + "s" * 96 + "b" * 5 + "s" * 95)
    phase = bench.phase_of("bouncing", outcomes, "bouncer", "steady", start=4)
    assert phase.start_share == 0.5
    assert phase.block_shares == [0.02, 0.05]
    assert phase.bouncer_share == 0.035
    assert phase.last_share == 0.035  # fewer than 500: all of them
    assert (phase.bounced, phase.bounced_served_by_sibling, phase.failed) == (7, 7, 0)


def test_the_checks_hold_only_for_the_claimed_shape(bench: ModuleType):
    def phases(last_share_bounces: int, failed_after: int) -> dict:
        block = "b" * last_share_bounces + "s" * (100 - last_share_bounces)
        bouncing = _outcomes(bench, "bsbs" + "s" * 96 + block * 5)
        after = _outcomes(bench, "bs" * 50)
        if failed_after:
            after[0] = bench.Outcome(503, "bouncer", None, False)
        named = {"bouncing": bouncing, "behaving": after, "after the window": after}
        return {n: bench.phase_of(n, o, "bouncer", "steady", start=4) for n, o in named.items()}

    assert all(bench.checks(phases(5, 0)).values())
    assert not bench.checks(phases(10, 0))["last 500 under 10 %"]
    assert not bench.checks(phases(5, 1))["0 failed to the caller"]
