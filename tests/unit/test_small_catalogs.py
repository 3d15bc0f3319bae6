"""Small catalogs: on catalogs of 1, 2 and 5 capabilities, calibrated by the packaged
reference set, off-topic text reaches no business agent — as registered and after a
confirmed example — while in-scope paraphrases still route (bench/small_catalogs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_reach.model.decisions import TextMatch
from agent_reach.policy.policy import Policy
from agent_reach.routing.router import CapabilityMatch, decide

BENCH = Path(__file__).parents[2] / "bench" / "small_catalogs.py"
# In-scope paraphrases routed right per catalog state: 3/3, 4/5 and 10/11 when measured
# ("帮我查一下物流" goes to the generic agent on 2 and 5 capabilities; before the floor it
# routed on 2). A bound under that would pass a router that refuses everything.
MIN_IN_SCOPE_SHARE = 0.8


@pytest.mark.parametrize("docs_only", [False, True])
@pytest.mark.parametrize("size", [1, 2, 5])
async def test_off_topic_text_reaches_no_business_agent_and_in_scope_text_routes(
    bench, size, docs_only
):
    """Docs only: the desk's cards with their descriptions alone, where the reference
    guard alone keeps chit-chat out (without it 今天天气怎么样 and 怎么办 reach an agent)."""
    for outcome in await bench.evaluate(size, None, docs_only):
        assert outcome.off_topic_to_business == [], (size, outcome.learned, docs_only)
        share = outcome.in_scope_right / outcome.in_scope_total
        assert share >= MIN_IN_SCOPE_SHARE, (size, outcome.learned, outcome.in_scope_wrong)


def test_an_uncalibrated_raw_score_must_clear_the_threshold_by_the_margin(bench):
    index = bench.catalog_index(5)
    policy = Policy()
    # "怎么办" on five capabilities after "我买的东西怎么还没到" was confirmed for order.track
    matches = [CapabilityMatch("order.track", 0.531254, {"lexical": 0.531254})]
    text = TextMatch(["lexical", "embedding"], [], False, policy.min_confidence, policy.margin)
    assert decide(matches, index, policy, now=0.0, from_text=True, text=text).rule == "best"
    text.min_confidence = policy.min_confidence + policy.margin  # what the pipeline sets
    decision = decide(matches, index, policy, now=0.0, from_text=True, text=text)
    assert (decision.rule, decision.refused_by, decision.capability) == (
        "generic",
        "no_match",
        bench.GENERIC,
    )


async def test_a_one_capability_catalog_is_calibrated_by_the_reference_set(bench):
    from agent_reach.clock import ManualClock
    from agent_reach.config import Settings
    from agent_reach.routing.matchers.pipeline import MatchingPipeline

    policy = Policy()
    pipeline = MatchingPipeline(bench.catalog_index(1), ManualClock(), Settings())
    try:
        matched = await pipeline.match("怎么办", policy)
    finally:
        await pipeline.aclose()
    assert matched.text.calibrated is True  # before the reference set: False, floor 0.65
    assert matched.text.min_confidence == policy.min_confidence
