"""Declared semantics (docs/delivery.md): what a capability's instances promise of a repeat.

As HTTP's methods: `safe` — no side effects: re-sent after an unknown outcome to any
instance, and answered from memory (`degraded`) when nothing else can answer;
`idempotent` — side effects, but the instance's own guard by request id makes a repeat
harmless: re-sent to the instances it reached; neither — never re-sent once it may have
acted, never answered from memory.
"""

from __future__ import annotations

from collections.abc import Collection

from agent_reach.registry.index import Instance, RegistryIndex


def may_answer_from_memory(index: RegistryIndex, capability: str) -> bool:
    """Whether a remembered answer may stand in for `capability`.

    Answers are remembered only from instances that declared the capability safe
    (`invoke/finish.py`); one stands in only while no registered instance of it says
    otherwise (a re-registration that withdrew the word withdraws the memory too).
    """
    return all(i.spec.is_safe(capability) for i in index.instances_of(capability))


def may_resend(instance: Instance, capability: str, reached: Collection[str]) -> bool:
    """Whether a request that may already have acted may go to `instance`: any instance
    of a safe capability; an instance it `reached` that declared it idempotent (that
    instance's own guard knows the id; another's never saw it)."""
    spec = instance.spec
    return spec.is_safe(capability) or (instance.id in reached and spec.is_idempotent(capability))
