"""Routing decisions from plain data: factor scores, weights, liveness, ties."""

from __future__ import annotations

import pytest

from agent_reach.backends.protocols import InstanceRecord
from agent_reach.model.agents import AgentSpec
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.router import LEARNED, CapabilityMatch, decide, exact_match

NOW = 100.0


def add(index: RegistryIndex, agent_id: str, *caps: str, lease_left: float = 60.0, **extra):
    spec = AgentSpec(
        id=agent_id,
        capabilities=list(caps),
        transport={"endpoint": f"http://127.0.0.1:1/{agent_id}"},
        **extra,
    )
    instance = index.upsert(InstanceRecord(spec, 0.0), NOW + lease_left)
    instance.health = "healthy"  # probed: a new instance is `unknown` until then
    return instance


def test_exact_capability_picks_the_best_scored_live_instance():
    index = RegistryIndex()
    busy = add(index, "busy", "inventory.check")
    busy.stats.in_flight = 32  # half its capacity of 64
    add(index, "idle", "inventory.check")
    add(index, "other", "order.query")
    decision = decide(exact_match("inventory.check"), index, Policy(), now=NOW)
    assert decision.agent_id == "idle"
    assert decision.rule == "exact"
    assert [c.agent_id for c in decision.candidates] == ["idle", "busy"]
    assert decision.candidates[1].factors["load"] == 0.5
    # the load weight's share of the preset's total (the score is a weighted mean)
    assert decision.candidates[0].score - decision.candidates[1].score == pytest.approx(
        0.15 * 0.5 / 1.30,
        abs=1e-6,  # scores are kept to 6 decimals
    )
    assert decision.margin is None  # one capability only


def test_expired_lease_leaves_the_pool_at_once():
    index = RegistryIndex()
    add(index, "gone", "x", lease_left=0.0)
    add(index, "offline", "x").health = "offline"
    decision = decide(exact_match("x"), index, Policy(), now=NOW)
    assert decision.agent_id is None
    assert decision.rule == "no_instance"


def test_unknown_capability_is_no_match():
    decision = decide(exact_match("nothing"), RegistryIndex(), Policy(), now=NOW)
    assert (decision.agent_id, decision.rule, decision.candidates) == (None, "no_match", [])


def test_suspect_instances_are_routable_but_scored_down():
    index = RegistryIndex()
    add(index, "suspect", "x").health = "suspect"
    add(index, "healthy", "x")
    decision = decide(exact_match("x"), index, Policy(), now=NOW)
    assert decision.agent_id == "healthy"
    assert decision.candidates[1].factors["health"] == 0.5


def test_an_instance_no_probe_answered_yet_loses_to_any_that_answered_but_alone_is_routed():
    index = RegistryIndex()
    new = add(index, "new", "x", weight=5.0)  # its weight alone would win
    new.health = "unknown"
    busy = add(index, "busy", "x")
    busy.stats.in_flight = 60  # nearly full: scored low on load
    decision = decide(exact_match("x"), index, Policy(), now=NOW)
    assert decision.agent_id == "busy"
    assert decision.candidates[1].factors["health"] == 0.5
    index.remove("busy")
    assert decide(exact_match("x"), index, Policy(), now=NOW).agent_id == "new"


def test_success_rate_and_affinity_count_with_default_weights():
    index = RegistryIndex()
    flaky = add(index, "flaky", "x")
    for ok in (True, False, False, False):
        flaky.stats.record(ok=ok, latency_ms=5.0)
    add(index, "fresh", "x")
    decision = decide(
        exact_match("x"), index, Policy(), now=NOW, warm_agents=frozenset({"flaky"})
    )
    by_id = {c.agent_id: c for c in decision.candidates}
    assert by_id["flaky"].factors["success"] == 0.25
    assert by_id["flaky"].factors["affinity"] == 1.0
    prior = 0.30 * 1.0  # quality: no outcome yet, the factor starts at 1
    total = 1.30  # the preset's weights: the score is their weighted mean, in [0, 1]
    flaky_sum = 0.30 + 0.25 + 0.20 + 0.15 + 0.10 * 0.25 + prior
    assert by_id["flaky"].score == pytest.approx(flaky_sum / total)
    assert by_id["fresh"].score == pytest.approx((0.80 + prior) / total)
    assert decision.agent_id == "flaky"


def test_dispatch_preset_weighs_latency():
    index = RegistryIndex()
    slow = add(index, "slow", "x")
    slow.stats.record(ok=True, latency_ms=300.0)
    fast = add(index, "fast", "x")
    fast.stats.record(ok=True, latency_ms=1.0)
    decision = decide(exact_match("x"), index, Policy(preset="dispatch"), now=NOW)
    assert decision.agent_id == "fast"
    assert decision.weights == {
        "match": 0.4,
        "health": 0.3,
        "latency": 0.2,
        "load": 0.1,
        "quality": 0.3,
    }
    assert decision.candidates[1].factors["latency"] == pytest.approx(100 / 400)


def test_instance_weight_scales_the_score_and_custom_weights_apply():
    index = RegistryIndex()
    add(index, "heavy", "x", weight=2.0)
    add(index, "light", "x")
    policy = Policy(weights={"health": 1.0})
    decision = decide(exact_match("x"), index, policy, now=NOW)
    assert [(c.agent_id, c.score) for c in decision.candidates] == [("heavy", 2.0), ("light", 1.0)]


def test_equal_scores_are_shared_between_instances():
    index = RegistryIndex()
    for name in ("a", "b", "c"):
        add(index, name, "x")
    chosen = {
        decide(exact_match("x"), index, Policy(), now=NOW).agent_id for _ in range(200)
    }
    assert chosen == {"a", "b", "c"}


def test_reregistering_keeps_stats_and_moves_capabilities():
    index = RegistryIndex()
    first = add(index, "a", "x")
    first.stats.record(ok=True, latency_ms=3.0)
    again = add(index, "a", "y")
    assert again is first and again.stats.calls == 1
    assert index.instances_of("x") == [] and index.instances_of("y") == [first]
    index.remove("a")
    assert index.by_id == {} and index.by_capability == {}


def test_policy_versions_follow_content():
    assert Policy().version == Policy().version
    assert Policy(margin=0.2).version != Policy().version
    with pytest.raises(ValueError, match="unknown preset"):
        Policy(preset="nope")
    with pytest.raises(ValueError, match="positive"):
        Policy(weights={"match": 0.0})


def test_timeout_classes_in_a_policy_add_to_the_defaults():
    policy = Policy.model_validate(
        {"timeout_classes": {"quick": {"timeout_s": 0.2}, "query": {"timeout_s": 1.0}}}
    )
    assert set(policy.timeout_classes) == {"quick", "query", "reasoning", "long"}
    assert policy.timeout_classes["query"].timeout_s == 1.0
    assert policy.timeout_classes["reasoning"].retries == 1


def test_catalog_uses_skills_where_given_and_skips_generic_agents():
    from agent_reach.routing.catalog import build_catalog

    index = RegistryIndex()
    add(
        index,
        "shop",
        "product.query",
        "inventory.check",
        description="商品问答、库存查询",
        examples=["这款手机有蓝色吗"],
        skills=[{"capability": "inventory.check", "description": "库存", "examples": ["有货吗"]}],
    )
    add(index, "shop-2", "product.query", description="商品问答、库存查询", examples=["多少钱"])
    add(index, "human", "human.handoff", generic=True, description="人工客服")
    version = index.version
    catalog = build_catalog(index)
    assert set(catalog) == {"product.query", "inventory.check"}
    assert catalog["inventory.check"].descriptions == ("库存",)
    assert catalog["inventory.check"].examples == ("有货吗",)
    assert catalog["product.query"].descriptions == ("商品问答、库存查询",)
    assert catalog["product.query"].examples == ("这款手机有蓝色吗", "多少钱")
    index.renew("shop", NOW + 100)
    assert index.version == version
    index.remove("shop-2")
    assert index.version == version + 1


def test_catalog_marks_the_examples_learned_from_feedback():
    from agent_reach.routing.catalog import build_catalog

    index = RegistryIndex()
    add(index, "shop", "product.query", description="商品问答", examples=["多少钱"])
    learned = {"product.query": ("多少钱", "有优惠吗"), "gone.away": ("你好",)}
    card = build_catalog(index, learned)["product.query"]
    assert card.examples == ("多少钱", "有优惠吗")
    assert card.learned == ("有优惠吗",), "a registered text stays registered"
    assert build_catalog(index)["product.query"].learned == ()


def text_matches(*pairs: tuple[str, float]) -> list[CapabilityMatch]:
    return [CapabilityMatch(tag, confidence, {"raw": confidence}) for tag, confidence in pairs]


def test_the_margin_rule_compares_match_confidences_not_instance_scores():
    index = RegistryIndex()
    add(index, "parcel-1", "parcel.track")
    add(index, "order-1", "order.query")
    # a 0.10 gap in confidence is 0.03 in instance scores: both below the 0.15 margin, but
    # a 0.20 gap (0.06 in scores) must route: only the confidence gap counts
    close = decide(
        text_matches(("parcel.track", 0.8), ("order.query", 0.7)),
        index,
        Policy(),
        now=NOW,
        from_text=True,
    )
    assert (close.rule, close.agent_id, close.margin) == ("margin", None, pytest.approx(0.1))
    clear = decide(
        text_matches(("parcel.track", 0.8), ("order.query", 0.6)),
        index,
        Policy(),
        now=NOW,
        from_text=True,
    )
    assert (clear.rule, clear.agent_id, clear.margin) == ("best", "parcel-1", pytest.approx(0.2))


def test_below_min_confidence_is_no_match_however_clear_the_gap():
    index = RegistryIndex()
    add(index, "parcel-1", "parcel.track")
    decision = decide(
        text_matches(("parcel.track", 0.45)), index, Policy(), now=NOW, from_text=True
    )
    assert (decision.rule, decision.agent_id) == ("no_match", None)
    assert decision.candidates[0].factors["match"] == 0.45


def test_instance_factors_rank_instances_but_never_switch_the_capability():
    index = RegistryIndex()
    add(index, "parcel-1", "parcel.track").health = "suspect"
    busy = add(index, "parcel-2", "parcel.track")
    busy.stats.in_flight = 64
    add(index, "order-1", "order.query")  # healthy and idle, scores higher as an instance
    decision = decide(
        text_matches(("parcel.track", 0.9), ("order.query", 0.5)),
        index,
        Policy(),
        now=NOW,
        from_text=True,
    )
    assert decision.capability == "parcel.track"
    assert [c.capability for c in decision.candidates] == [
        "parcel.track",
        "parcel.track",
        "order.query",
    ]
    assert decision.candidates[-1].score > decision.candidates[0].score
    assert decision.agent_id == decision.candidates[0].agent_id


def test_a_text_whose_capability_has_no_live_instance_is_not_sent_elsewhere():
    index = RegistryIndex()
    add(index, "parcel-1", "parcel.track").health = "offline"
    add(index, "order-1", "order.query")
    decision = decide(
        text_matches(("parcel.track", 0.9), ("order.query", 0.3)),
        index,
        Policy(),
        now=NOW,
        from_text=True,
    )
    assert (decision.rule, decision.agent_id) == ("no_instance", None)


def test_a_learned_text_goes_to_its_capability_without_thresholds():
    index = RegistryIndex()
    add(index, "parcel-1", "parcel.track")
    add(index, "order-1", "order.query")
    learned = [
        CapabilityMatch("parcel.track", 1.0, {LEARNED: 1.0}),
        *text_matches(("order.query", 0.95)),  # within any margin of it
    ]
    decision = decide(learned, index, Policy(), now=NOW, from_text=True)
    assert (decision.rule, decision.agent_id) == ("learned", "parcel-1")
    plain = decide(
        text_matches(("parcel.track", 1.0), ("order.query", 0.95)),
        index,
        Policy(),
        now=NOW,
        from_text=True,
    )
    assert plain.rule == "margin"
