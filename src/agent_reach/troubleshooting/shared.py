"""The `why` records every coordinator reads: answers, and the context reads made for them.

Behind a load balancer, the coordinator asked `why` is rarely the one that answered, and
an agent's context read may reach a third. With a shared store the journal hands every
answered request and every context read to `SharedJournal`, which writes them off the
request path: every `FLUSH_S`, one pipelined round trip with the newest `PER_FLUSH`
answers and reads of the interval (so at most 256 of each a second per coordinator;
beyond that the older ones of an interval stay in the local journal only). An answer's
record carries the serving coordinator's node id and its history of the decision's
candidates at that time, so a walk elsewhere shows what the serving coordinator saw.
A request's records expire `TTL_S` after its last one was written.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import asdict
from typing import Any

import orjson
import structlog

from agent_reach.backends.protocols import WhyStore
from agent_reach.errors import StoreUnavailable
from agent_reach.registry.history import InstanceHistory, InstanceSnapshot
from agent_reach.troubleshooting.journal import (
    ContextRead,
    JournalEntry,
    RecordedHistory,
    RequestJournal,
)
from agent_reach.wire.answer import Answer

log = structlog.get_logger("agent_reach.troubleshooting")

FLUSH_S = 0.25  # a record is readable everywhere within this long
PER_FLUSH = 64  # answers (and, apart, reads) written per flush at most: 256 a second
PER_REQUEST = 16  # records kept per request id: its answers (replays too) and reads
TTL_S = 300.0  # `why` is for the last minutes; the local journal keeps 10,000 requests
MAX_BODY_BYTES = 16 * 1024  # a larger answer is shared without its result

_SEPARATOR = b"\n"  # header JSON, then the payload as it was (orjson writes no newline)


class SharedJournal:
    """Buffers this coordinator's records and writes them to the `WhyStore` in batches."""

    def __init__(self, store: WhyStore, history: InstanceHistory) -> None:
        self.store = store
        self.history = history
        self.dropped = 0  # records left out of a full flush (still in the local journal)
        self.unwritten = 0  # records lost to a store outage
        self._answers: deque[JournalEntry] = deque(maxlen=PER_FLUSH)
        self._reads: deque[tuple[str, ContextRead]] = deque(maxlen=PER_FLUSH)

    def answered(self, entry: JournalEntry) -> None:
        """Share an answered request; never waits."""
        if len(self._answers) == PER_FLUSH:
            self.dropped += 1
        self._answers.append(entry)

    def read(self, request_id: str, read: ContextRead) -> None:
        """Share an agent's context read for `request_id`; never waits."""
        if len(self._reads) == PER_FLUSH:
            self.dropped += 1
        self._reads.append((request_id, read))

    async def run(self) -> None:
        """Write the buffered records every `FLUSH_S`, until cancelled."""
        while True:
            await asyncio.sleep(FLUSH_S)
            await self.flush()

    async def flush(self) -> None:
        """Write what is buffered in one round trip; an outage loses this batch only."""
        batch = [(e.request_id, self._encode_answer(e)) for e in self._answers]
        batch += [(request_id, _encode_read(r)) for request_id, r in self._reads]
        self._answers.clear()
        self._reads.clear()
        try:
            await self.store.add(batch, PER_REQUEST, TTL_S)
        except StoreUnavailable:
            self.unwritten += len(batch)
            log.warning("why_records_not_shared", count=len(batch))

    async def find(self, request_id: str) -> tuple[list[JournalEntry], list[ContextRead]]:
        """The request's shared answers (oldest first) and context reads."""
        entries: list[JournalEntry] = []
        reads: list[ContextRead] = []
        for record in await self.store.get(request_id):
            header, _, payload = record.partition(_SEPARATOR)
            meta = orjson.loads(header)
            if meta["kind"] == "answer":
                entries.append(_decode_answer(request_id, meta, payload))
            else:
                reads.append(_decode_read(meta, payload))
        return entries, reads

    def _encode_answer(self, entry: JournalEntry) -> bytes:
        body = entry.answer.body
        decoded = orjson.loads(body)
        if len(body) > MAX_BODY_BYTES and isinstance(decoded, dict):
            decoded.pop("result", None)
            body = orjson.dumps(decoded)
        instances = {}
        for agent_id in _candidates(decoded):
            snapshot = self.history.at(agent_id, entry.time)
            if snapshot is not None:
                instances[agent_id] = asdict(snapshot)
        header = {
            "kind": "answer",
            "node": entry.node,
            "principal": entry.principal,
            "trace_id": entry.trace_id,
            "time": entry.time,
            "duration_ms": entry.duration_ms,
            "context_id": entry.context_id,
            "status": entry.answer.status,
            "instances": instances,
            "delegation": entry.delegation,
        }
        return orjson.dumps(header) + _SEPARATOR + body


async def find_everywhere(journal: RequestJournal, request_id: str) -> list[JournalEntry]:
    """The request's entries from this coordinator's journal, else from the shared store,
    each with every context read made for it at any coordinator.

    The store down or not shared: this coordinator's journal alone.
    """
    entries = journal.find(request_id)
    if journal.shared is None:
        return entries
    try:
        shared, reads = await journal.shared.find(request_id)
    except StoreUnavailable:
        return entries
    if not entries:
        entries = shared
    for entry in entries:
        seen = {(r.time, r.context_id) for r in reads}
        merged = reads + [r for r in entry.reads if (r.time, r.context_id) not in seen]
        entry.reads = sorted(
            (r for r in merged if r.context_id == entry.context_id), key=lambda r: r.time
        )
    return entries


def _candidates(body: Any) -> list[str]:
    """The agent ids a body's routing decision weighed."""
    if not isinstance(body, dict):
        return []
    route = body.get("route")
    if not isinstance(route, dict) and isinstance(body.get("error"), dict):
        route = body["error"].get("route")
    if not isinstance(route, dict):
        return []
    candidates = route.get("candidates") or []
    return [c["agent_id"] for c in candidates if isinstance(c, dict) and "agent_id" in c]


def _decode_answer(request_id: str, meta: dict[str, Any], body: bytes) -> JournalEntry:
    snapshots = {
        agent_id: InstanceSnapshot(**{**state, "context_fields": tuple(state["context_fields"])})
        for agent_id, state in meta["instances"].items()
    }
    return JournalEntry(
        request_id,
        meta["principal"],
        meta["trace_id"],
        meta["time"],
        meta["duration_ms"],
        meta["context_id"],
        Answer(meta["status"], body),
        node=meta["node"],
        recorded=RecordedHistory(snapshots),
        delegation=meta.get("delegation"),
    )


def _encode_read(read: ContextRead) -> bytes:
    header = {
        "kind": "read",
        "time": read.time,
        "context_id": read.context_id,
        "granted": read.granted,
        "sizes": read.sizes,
    }
    return orjson.dumps(header) + _SEPARATOR + (read.document or b"")


def _decode_read(meta: dict[str, Any], document: bytes) -> ContextRead:
    return ContextRead(
        meta["time"], meta["context_id"], tuple(meta["granted"]), meta["sizes"], document or None
    )
