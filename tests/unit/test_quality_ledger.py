"""The outcome ledger: the Beta estimate, the sliding window, ratings and who may give them."""

from __future__ import annotations

from typing import Any

import pytest
from rich.console import Console

from agent_reach.backends.memory.quality import MemoryQualityStore
from agent_reach.backends.protocols import InstanceRecord
from agent_reach.cli.route_view import decision_view
from agent_reach.clock import ManualClock
from agent_reach.errors import StoreUnavailable
from agent_reach.mesh.quality import AlreadyRated, QualityLedger, UnknownRequest
from agent_reach.model.agents import AgentSpec
from agent_reach.model.keys import Chain, Link, Principal
from agent_reach.model.quality import PRIOR, Outcomes, QualityPolicy
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.router import decide, exact_match

WINDOW_S = 60.0
ALICE = Principal("k-alice", "alice", None, "caller")
BOB = Principal("k-bob", "bob", None, "caller")


def ledger_of(*agent_ids: str) -> tuple[QualityLedger, RegistryIndex, ManualClock]:
    clock = ManualClock()
    index = RegistryIndex()
    for agent_id in agent_ids:
        spec = AgentSpec(
            id=agent_id, capabilities=["x"], transport={"endpoint": "http://127.0.0.1:1/"}
        )
        index.upsert(InstanceRecord(spec, 0.0), clock.monotonic() + 600).health = "healthy"
    policy = Policy.model_validate({"quality": {"window_s": WINDOW_S}})
    store = MemoryQualityStore(clock)
    return QualityLedger(store, index, lambda: policy, clock), index, clock


def chain_of(root: str, *instances: str) -> Chain:
    links = tuple(Link(f"owner-{i}", None, "agent", i, "x") for i in instances)
    return Chain(ALICE, links, root, ("*",), None, 5, None, 2e9)


def test_the_factor_starts_at_1_and_only_evidence_against_lowers_it() -> None:
    policy = QualityPolicy()
    prior = 3 / 4  # Beta(3, 1)'s mean: the factor is the posterior's mean over it, at most 1
    assert PRIOR.quality == 1.0 and PRIOR.counts == {}
    assert Outcomes.of({"completed": 6}, policy).quality == 1.0  # a good record: no reward
    assert Outcomes.of({"completed": 3, "bounced": 3}, policy).quality == pytest.approx(
        (6 / 10) / prior, abs=1e-4
    )
    bad = Outcomes.of({"completed": 1, "bad": 1}, policy)  # a bad rating outweighs its completion
    assert bad.quality == pytest.approx((4 / 7) / prior, abs=1e-4)
    assert bad.counts == {"completed": 1, "bad": 1}
    assert Outcomes.of({"declined": 2}, policy).quality == pytest.approx((3 / 5) / prior, abs=1e-4)


async def test_a_bouncing_instance_loses_routing_to_its_sibling_at_once() -> None:
    ledger, index, _ = ledger_of("bouncer", "sibling")
    for _ in range(4):
        ledger.record("bouncer", "bounced")
        ledger.record("sibling", "completed")
    decision = decide(exact_match("x"), index, Policy(), now=1_000.0)
    assert decision.agent_id == "sibling"
    by_id = {c.agent_id: c for c in decision.candidates}
    assert by_id["bouncer"].outcomes == {"bounced": 4}
    assert by_id["bouncer"].factors["quality"] == pytest.approx((3 / 8) / (3 / 4), abs=1e-4)
    assert by_id["sibling"].factors["quality"] == 1.0


async def test_outcomes_are_shared_through_the_store_and_forgotten_after_the_window() -> None:
    ledger, index, clock = ledger_of("a-1")
    ledger.record("a-1", "failed")
    await ledger.refresh()
    assert index.by_id["a-1"].outcomes.counts == {"failed": 1}
    other = QualityLedger(ledger._store, index, ledger._policy, clock)  # another coordinator
    await other.refresh()
    assert other.outcomes_of("a-1").counts == {"failed": 1}
    clock.advance(WINDOW_S / 2)
    ledger.record("a-1", "completed")
    await ledger.refresh()
    assert index.by_id["a-1"].outcomes.counts == {"failed": 1, "completed": 1}
    clock.advance(WINDOW_S / 2 + 0.01)  # the failure's bucket is out of the window
    await ledger.refresh()
    assert index.by_id["a-1"].outcomes.counts == {"completed": 1}
    clock.advance(WINDOW_S)
    await ledger.refresh()
    assert index.by_id["a-1"].outcomes == Outcomes({}, 1.0)


async def test_an_outcome_counts_at_once_on_top_of_the_window_read_back() -> None:
    ledger, index, clock = ledger_of("a-1")
    other = QualityLedger(ledger._store, index, ledger._policy, clock)  # another coordinator
    other.record("a-1", "bounced")
    other.record("gone", "failed")  # an instance no longer registered here
    await other.refresh()
    await ledger.refresh()
    ledger.record("a-1", "completed")  # no flush yet: on top of the totals read back
    ledger.record("gone", "failed")
    assert list(index.by_id["a-1"].outcomes.counts.items()) == [("completed", 1), ("bounced", 1)]
    assert index.by_id["a-1"].outcomes.quality == pytest.approx((4 / 6) / (3 / 4), abs=1e-4)
    assert ledger.outcomes_of("gone").counts == {"failed": 2}


async def test_the_caller_rates_once_and_anyone_else_is_told_there_is_no_such_request() -> None:
    ledger, index, _ = ledger_of("a-1")
    ledger.served("r-1", "a-1", ALICE)
    with pytest.raises(UnknownRequest):
        await ledger.rate(BOB, "r-1", "bad")
    with pytest.raises(UnknownRequest):
        await ledger.rate(ALICE, "r-2", "bad")
    assert await ledger.rate(ALICE, "r-1", "bad") == {
        "request_id": "r-1",
        "agent_id": "a-1",
        "rating": "bad",
    }
    assert index.by_id["a-1"].outcomes.counts == {"bad": 1}
    await ledger.refresh()  # the record is now read from the store
    with pytest.raises(AlreadyRated):
        await ledger.rate(ALICE, "r-1", "good")


async def test_an_agent_that_delegated_the_request_may_rate_it_and_no_other_agent() -> None:
    ledger, index, _ = ledger_of("a-1", "b-1", "c-1")
    # alice -> a-1 (root r-0) -> b-1 delegated r-2, served by c-1
    delegated = Principal("k-alice", "alice", None, "caller", chain=chain_of("r-0", "a-1", "b-1"))
    ledger.served("r-2", "c-1", delegated)
    await ledger.refresh()
    as_c = Principal("k-alice", "alice", None, "caller", chain=chain_of("r-0", "a-1", "b-1", "c-1"))
    other_chain = Principal("k-alice", "alice", None, "caller", chain=chain_of("r-9", "b-1"))
    for stranger in (as_c, other_chain):
        with pytest.raises(UnknownRequest):
            await ledger.rate(stranger, "r-2", "bad")
    as_a = Principal("k-alice", "alice", None, "caller", chain=chain_of("r-0", "a-1"))
    assert (await ledger.rate(as_a, "r-2", "good"))["agent_id"] == "c-1"
    assert index.by_id["c-1"].outcomes.counts == {"good": 1}


class FlakyStore(MemoryQualityStore):
    """A memory store whose next `add` fails as an unreachable store does."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.down = False

    async def add(self, series: str, bucket: int, counts: Any, ttl_s: float) -> None:
        if self.down:
            raise StoreUnavailable("the store is down")
        await super().add(series, bucket, counts, ttl_s)


async def test_a_store_outage_delays_the_outcomes_and_counts_each_once() -> None:
    _, index, clock = ledger_of("a-1")
    store = FlakyStore(clock)
    policy = Policy()
    ledger = QualityLedger(store, index, lambda: policy, clock)
    ledger.record("a-1", "completed")
    store.down = True
    with pytest.raises(StoreUnavailable):
        await ledger.refresh()
    assert index.by_id["a-1"].outcomes.counts == {"completed": 1}  # still counted here
    store.down = False
    await ledger.refresh()
    await ledger.refresh()
    assert index.by_id["a-1"].outcomes.counts == {"completed": 1}


def test_the_cli_shows_the_quality_factor_with_its_counts() -> None:
    ledger, index, _ = ledger_of("bouncer", "sibling")
    ledger.record("bouncer", "bounced")
    ledger.record("bouncer", "timed_out")
    decision = decide(exact_match("x"), index, Policy(), now=1_000.0)
    console = Console(record=True, width=100)
    console.print(decision_view(decision))
    text = console.export_text()
    assert "(timed out 1, bounced 1)" in text
    assert "(no outcome yet: the prior)" in text
