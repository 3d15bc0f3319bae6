"""Adaptive factor weights from plain data: outcomes move them, the policy bounds them."""

from __future__ import annotations

import pytest

from agent_reach.backends.protocols import InstanceRecord
from agent_reach.model.agents import AgentSpec
from agent_reach.policy.learning import AdaptationPolicy
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.adaptation import WeightLearner
from agent_reach.routing.router import decide, exact_match

NOW = 100.0
ADAPTIVE = Policy(adaptation=AdaptationPolicy(enabled=True, rate=0.5, low=0.5, high=2.0))


def two_instances() -> RegistryIndex:
    index = RegistryIndex()
    for agent_id in ("idle-1", "busy-1"):
        spec = AgentSpec(
            id=agent_id, capabilities=["stock.check"], transport={"endpoint": "http://127.0.0.1:1/"}
        )
        index.upsert(InstanceRecord(spec, 0.0), NOW + 60)
    index.by_id["busy-1"].stats.in_flight = 48  # load factor 0.25 against idle-1's 1.0
    return index


def route(index: RegistryIndex, learner: WeightLearner, policy: Policy):
    return decide(
        exact_match("stock.check"),
        index,
        policy,
        now=NOW,
        weights_of=lambda tag: learner.weights(tag, policy),
    )


def test_failures_of_the_instance_a_factor_favoured_lower_that_factor_within_bounds():
    index, learner = two_instances(), WeightLearner()
    first = route(index, learner, ADAPTIVE)
    assert first.agent_id == "idle-1"
    assert first.weights == ADAPTIVE.effective_weights
    for _ in range(50):
        learner.record(first, "idle-1", ok=False, policy=ADAPTIVE)
    later = route(index, learner, ADAPTIVE)
    base = ADAPTIVE.effective_weights
    assert later.weights["load"] == pytest.approx(base["load"] * 0.5)  # at the lower bound
    assert later.weights["health"] == base["health"]  # both healthy: no lead, no change
    assert later.candidates[0].score < first.candidates[0].score


def test_successes_raise_the_factor_up_to_the_upper_bound():
    index, learner = two_instances(), WeightLearner()
    first = route(index, learner, ADAPTIVE)
    for _ in range(100):
        learner.record(first, "idle-1", ok=True, policy=ADAPTIVE)
    assert route(index, learner, ADAPTIVE).weights["load"] == pytest.approx(
        ADAPTIVE.effective_weights["load"] * 2.0
    )


def test_off_by_default_the_weights_are_the_policys():
    index, learner = two_instances(), WeightLearner()
    policy = Policy()
    first = route(index, learner, policy)
    learner.record(first, "idle-1", ok=False, policy=policy)
    assert route(index, learner, policy).weights == policy.effective_weights
