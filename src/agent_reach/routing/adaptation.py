"""Online adaptation of the instance factor weights, per capability, within policy bounds.

A simple, explainable learner: each capability has a multiplier per factor, starting at 1.
After a delivery to one of its instances, every factor's multiplier moves by
exp(rate x reward x lead): reward is +1 for a success and -1 for a failure, lead is how far
the served instance's factor stood above the mean of the capability's candidates in that
decision (the factor's share in the choice). Factors that picked instances which then
failed lose weight, those that picked instances which served gain it. A multiplier stays
within the policy's [low, high]. Off unless `adaptation.enabled`; the weights in force are
in every decision (`weights`).
"""

from __future__ import annotations

import math
from collections import OrderedDict

from agent_reach.model.decisions import RouteDecision
from agent_reach.policy.policy import Policy

MAX_CAPABILITIES = 10_000  # capabilities with learned multipliers; the least recent go first

Weights = tuple[tuple[str, float], ...]


class WeightLearner:
    """capability -> factor -> multiplier, learned from delivery outcomes."""

    def __init__(self, max_capabilities: int = MAX_CAPABILITIES) -> None:
        self.max_capabilities = max_capabilities
        self._multipliers: OrderedDict[str, dict[str, float]] = OrderedDict()

    def weights(self, capability: str, policy: Policy) -> Weights:
        """The factor weights in force for a capability: the policy's, times what was learned."""
        learned = self._multipliers.get(capability)
        if not policy.adaptation.enabled or learned is None:
            return policy.weight_items
        return tuple((f, round(w * learned.get(f, 1.0), 6)) for f, w in policy.weight_items)

    def record(self, decision: RouteDecision, agent_id: str, *, ok: bool, policy: Policy) -> None:
        """Learn from one delivery to `agent_id`, an instance the decision weighed."""
        adaptation = policy.adaptation
        if not adaptation.enabled:
            return
        mine = [c for c in decision.candidates if c.agent_id == agent_id]
        if not mine:
            return
        served = mine[0]
        peers = [c for c in decision.candidates if c.capability == served.capability]
        if len(peers) < 2:
            return  # nothing to tell apart
        learned = self._multipliers.setdefault(served.capability, {})
        self._multipliers.move_to_end(served.capability)
        while len(self._multipliers) > self.max_capabilities:
            self._multipliers.popitem(last=False)
        reward = 1.0 if ok else -1.0
        for factor, _ in policy.weight_items:
            mean = sum(c.factors.get(factor, 0.0) for c in peers) / len(peers)
            lead = served.factors.get(factor, 0.0) - mean
            value = learned.get(factor, 1.0) * math.exp(adaptation.rate * reward * lead)
            learned[factor] = min(adaptation.high, max(adaptation.low, value))
