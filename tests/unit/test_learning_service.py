"""Corrections from plain data: only the caller that routed a text may correct it."""

from __future__ import annotations

import pytest

from agent_reach.backends.memory.learning import MemoryLearningStore
from agent_reach.backends.protocols import InstanceRecord
from agent_reach.clock import ManualClock
from agent_reach.errors import ValidationFailed
from agent_reach.learning.service import LearningService, UnknownRequest
from agent_reach.model.agents import AgentSpec
from agent_reach.model.keys import Principal
from agent_reach.observability.metrics import Metrics
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex

ALICE = Principal("k-alice", "alice", "default", "caller")
BOB = Principal("k-bob", "bob", "default", "caller")
ADMIN = Principal("k-admin", "ops", "default", "admin")


@pytest.fixture
def learning() -> LearningService:
    index = RegistryIndex()
    for agent_id, capability, generic in (
        ("faq-1", "faq.answer", False),
        ("human-1", "human", True),
    ):
        spec = AgentSpec(
            id=agent_id,
            capabilities=[capability],
            generic=generic,
            transport={"endpoint": "http://127.0.0.1:1/"},
        )
        index.upsert(InstanceRecord(spec, 0.0), 1e9)
    clock = ManualClock()
    return LearningService(MemoryLearningStore(clock), index, Policy, clock, Metrics())


async def test_a_caller_corrects_its_own_text_and_no_one_elses(learning):
    await learning.record_text("r-1", "alice", "怎么开发票", None)
    with pytest.raises(UnknownRequest):
        await learning.correct(BOB, "r-1", "faq.answer")
    example = await learning.correct(ALICE, "r-1", "faq.answer")
    assert (example.principal, example.capability, example.text) == (
        "alice",
        "faq.answer",
        "怎么开发票",
    )
    assert learning.snapshot().positive["怎么开发票"].id == example.id
    await learning.correct(ADMIN, "r-1", "faq.answer")  # the owner override of admins


async def test_a_text_older_than_the_correction_window_cannot_be_corrected(learning):
    await learning.record_text("r-1", "alice", "怎么开发票", None)
    learning.clock.advance(Policy().learning.correctable_s + 1)  # type: ignore[attr-defined]
    with pytest.raises(UnknownRequest):
        await learning.correct(ALICE, "r-1", "faq.answer")


async def test_a_generic_agent_is_no_capability_to_correct_to(learning):
    await learning.record_text("r-1", "alice", "转人工", None)
    with pytest.raises(ValidationFailed):
        await learning.correct(ALICE, "r-1", "human")
