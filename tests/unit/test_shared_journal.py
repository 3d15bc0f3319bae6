"""SharedJournal on plain data: what is shared of an answer, and the bound per flush."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from agent_reach.backends.protocols import InstanceRecord
from agent_reach.clock import ManualClock
from agent_reach.model.agents import AgentSpec, TransportSpec
from agent_reach.model.keys import Principal
from agent_reach.registry.history import InstanceHistory
from agent_reach.registry.index import RegistryIndex
from agent_reach.troubleshooting.journal import RequestJournal
from agent_reach.troubleshooting.shared import MAX_BODY_BYTES, PER_FLUSH, SharedJournal
from agent_reach.wire.answer import Answer

ALICE = Principal("k-1", "alice", None, "caller")


class ListStore:
    """A `WhyStore` in a dict, for plain-data tests."""

    def __init__(self) -> None:
        self.lists: dict[str, list[bytes]] = {}

    async def add(self, records: Sequence[tuple[str, bytes]], cap: int, ttl_s: float) -> None:
        for request_id, record in records:
            self.lists.setdefault(request_id, []).append(record)
            del self.lists[request_id][:-cap]

    async def get(self, request_id: str) -> list[bytes]:
        return list(self.lists.get(request_id, []))


def _setup() -> tuple[RequestJournal, SharedJournal, ManualClock]:
    clock, index = ManualClock(), RegistryIndex()
    spec = AgentSpec(
        id="a-1", capabilities=["echo"], transport=TransportSpec(endpoint="http://127.0.0.1:9/")
    )
    index.upsert(
        InstanceRecord(spec=spec, registered_at=1.0), clock.monotonic() + 30
    ).health = "healthy"
    history = InstanceHistory(index, clock)
    history.sample()
    journal = RequestJournal(clock, node_id="coord-a")
    journal.shared = SharedJournal(ListStore(), history)
    return journal, journal.shared, clock


def _answer(result: object) -> Answer:
    route = {"agent_id": "a-1", "capability": "echo", "candidates": [{"agent_id": "a-1"}]}
    return Answer.of(200, {"status": "ok", "agent_id": "a-1", "route": route, "result": result})


async def test_a_shared_answer_carries_its_node_and_the_candidates_history() -> None:
    journal, shared, clock = _setup()
    journal.record("r-1", ALICE, "t" * 32, None, _answer(1), 0.0)
    await shared.flush()

    [entry], reads = await shared.find("r-1")

    assert (entry.node, entry.principal, entry.body()["result"]) == ("coord-a", "alice", 1)
    assert reads == []
    assert entry.recorded is not None
    snapshot = entry.recorded.at("a-1", clock.wall())
    assert snapshot is not None and snapshot.health == "healthy"


async def test_a_large_answer_is_shared_without_its_result() -> None:
    journal, shared, _ = _setup()
    journal.record("r-big", ALICE, "t" * 32, None, _answer("x" * MAX_BODY_BYTES), 0.0)
    await shared.flush()

    [entry], _ = await shared.find("r-big")

    assert "result" not in entry.body()
    assert orjson.loads(entry.answer.body)["agent_id"] == "a-1"


async def test_one_flush_shares_the_newest_answers_up_to_its_bound() -> None:
    journal, shared, _ = _setup()
    for n in range(PER_FLUSH + 5):
        journal.record(f"r-{n}", ALICE, "t" * 32, None, _answer(n), 0.0)
    await shared.flush()

    assert shared.dropped == 5
    assert (await shared.find("r-0"))[0] == []
    assert len((await shared.find(f"r-{PER_FLUSH + 4}"))[0]) == 1
    assert len(journal.find("r-0")) == 1  # still in the local journal
