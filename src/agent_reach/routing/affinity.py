"""Context affinity: which instances recently served which context."""

from __future__ import annotations

from collections import OrderedDict

AFFINITY_TTL_S = 600.0  # an instance stays "warm" for a context this long after serving it
MAX_CONTEXTS = 100_000  # bounded memory: the least recently used contexts are forgotten first


class AffinityTable:
    """context_id -> {agent_id: last served (monotonic s)}, bounded, least recent first out."""

    def __init__(self, ttl_s: float = AFFINITY_TTL_S, max_contexts: int = MAX_CONTEXTS) -> None:
        self.ttl_s = ttl_s
        self.max_contexts = max_contexts
        self._served: OrderedDict[str, dict[str, float]] = OrderedDict()

    def record(self, context_id: str, agent_id: str, now: float) -> None:
        """Remember that `agent_id` served `context_id` at `now`."""
        agents = self._served.get(context_id)
        if agents is None:
            agents = self._served[context_id] = {}
            if len(self._served) > self.max_contexts:
                self._served.popitem(last=False)
        else:
            self._served.move_to_end(context_id)
        agents[agent_id] = now

    def warm_agents(self, context_id: str | None, now: float) -> frozenset[str]:
        """Instances that served the context within the ttl."""
        agents = self._served.get(context_id) if context_id else None
        if not agents:
            return frozenset()
        return frozenset(a for a, at in agents.items() if now - at < self.ttl_s)
