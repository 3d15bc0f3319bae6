"""The request journal: the last requests this coordinator answered, for `why`.

Recording appends one tuple that keeps a reference to the answer's bytes, already made
for the caller: nothing is serialized, copied or indexed on the request path. An entry
is made of its tuple only when `why` asks for that request (a scan of at most `size`
tuples, rare next to the requests recorded), and the walk decodes the bytes then.
Bounded by count and by bytes held, and an answer over MAX_KEPT_ANSWER_BYTES is kept
without its result (re-encoded once, for those answers only): `why` needs the route and
the attempts, and 64 MB of results held after a burst of big answers is a process that
never comes back down (bench/memory.py). Like traces, each coordinator keeps its own, and
on a shared store also hands every entry and read to the shared journal (shared.py),
so that `why` finds a request whichever coordinator answered it.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from agent_reach.clock import Clock
from agent_reach.mesh.tokens import delegation_record
from agent_reach.model.keys import Chain, Principal
from agent_reach.registry.history import InstanceSnapshot
from agent_reach.wire.answer import Answer

DEFAULT_REQUESTS = 10_000  # answers kept: as many as the trace store keeps traces
MAX_BYTES = 64 * 1024 * 1024  # answer bodies held at most; the oldest requests go first
# The answer memory's default bound too (AR_ANSWER_MAX_BYTES): a bigger result is content
# nobody replays, so `why` shows its size instead.
MAX_KEPT_ANSWER_BYTES = 256 * 1024
MAX_VALUE_BYTES = 16 * 1024  # a context read's values are kept up to this; beyond, sizes only
READS_PER_REQUEST = 8  # context reads kept per request (retries read again)
MAX_PENDING_READS = 10_000  # reads of requests not answered yet


@dataclass(frozen=True, slots=True)
class ContextRead:
    """What an agent read of a request's context: top-level fields with their sizes."""

    time: float
    context_id: str
    granted: tuple[str, ...]
    sizes: dict[str, int]
    document: bytes | None  # the projection as read, when small enough to keep


@dataclass(slots=True)
class JournalEntry:
    """One answered request: who asked, when, and the answer exactly as sent."""

    request_id: str
    principal: str
    trace_id: str
    time: float
    duration_ms: float
    context_id: str | None
    answer: Answer
    reads: list[ContextRead] = field(default_factory=list)
    node: str = ""  # the coordinator that answered it
    recorded: RecordedHistory | None = None  # the answering coordinator's instance history
    delegation: dict[str, Any] | None = None  # a delegated call: `delegation_record`

    def body(self) -> dict[str, Any]:
        decoded = orjson.loads(self.answer.body)
        return decoded if isinstance(decoded, dict) else {"result": decoded}


class RecordedHistory:
    """The serving coordinator's snapshots of one request's candidates, read like
    `InstanceHistory.at`."""

    def __init__(self, snapshots: dict[str, InstanceSnapshot]) -> None:
        self.snapshots = snapshots

    def at(self, agent_id: str, wall_time: float) -> InstanceSnapshot | None:
        return self.snapshots.get(agent_id)


class JournalSink(Protocol):
    """Where a coordinator on a shared store also hands its records (shared.py)."""

    def answered(self, entry: JournalEntry) -> None: ...

    def read(self, request_id: str, read: ContextRead) -> None: ...

    async def find(self, request_id: str) -> tuple[list[JournalEntry], list[ContextRead]]: ...


# What `record` keeps of one answer: request id, principal, trace id, context id, the
# answer, the wall and monotonic clocks at its start and end, and a delegated call's chain.
_Answered = tuple[str, str, str, str | None, Answer, float, float, float, Chain | None]


class RequestJournal:
    """The last `size` answers, oldest first (several principals may use the same id)."""

    def __init__(
        self,
        clock: Clock,
        size: int = DEFAULT_REQUESTS,
        node_id: str = "",
        shared: JournalSink | None = None,
    ) -> None:
        self.clock = clock
        self.size = size
        self.node_id = node_id
        self.shared = shared  # on a shared store, `why` finds what any coordinator answered
        self.bytes_held = 0
        self._answered: deque[_Answered] = deque()
        self._reads: OrderedDict[str, deque[ContextRead]] = OrderedDict()

    def record(
        self,
        request_id: str,
        principal: Principal,
        trace_id: str,
        context_id: str | None,
        answer: Answer,
        started: float,
    ) -> None:
        """Keep the answer of one request that began at monotonic `started`."""
        if len(answer.body) > MAX_KEPT_ANSWER_BYTES:
            answer = without_result(answer)
        answered = self._answered
        kept = (
            request_id,
            principal.name,
            trace_id,
            context_id,
            answer,
            self.clock.wall(),
            self.clock.monotonic(),
            started,
            principal.chain,
        )
        answered.append(kept)
        self.bytes_held += len(answer.body)
        while len(answered) > self.size or self.bytes_held > MAX_BYTES:
            self.bytes_held -= len(answered.popleft()[4].body)
        if self.shared is not None:
            self.shared.answered(self._entry(kept))

    def context_read(
        self, request_id: str, context_id: str, granted: tuple[str, ...], document: dict[str, Any]
    ) -> None:
        """An agent read its projection of `context_id` with the token of `request_id`."""
        sizes = {name: len(orjson.dumps(value)) for name, value in document.items()}
        encoded = orjson.dumps(document)
        read = ContextRead(
            self.clock.wall(),
            context_id,
            granted,
            sizes,
            encoded if len(encoded) <= MAX_VALUE_BYTES else None,
        )
        reads = self._reads.get(request_id)
        if reads is None:
            reads = self._reads[request_id] = deque(maxlen=READS_PER_REQUEST)
            if len(self._reads) > MAX_PENDING_READS:
                self._reads.popitem(last=False)
        reads.append(read)
        if self.shared is not None:
            self.shared.read(request_id, read)

    def find(self, request_id: str) -> list[JournalEntry]:
        """Every kept entry of `request_id`, oldest first, with the context reads it made."""
        entries = [self._entry(kept) for kept in self._answered if kept[0] == request_id]
        reads = self._reads.get(request_id, ())
        for entry in entries:
            entry.reads = [r for r in reads if r.context_id == entry.context_id]
        return entries

    def of_trace(self, trace_id: str) -> list[JournalEntry]:
        """Every kept entry of the requests in trace `trace_id`, oldest first."""
        return [self._entry(kept) for kept in self._answered if kept[2] == trace_id]

    def _entry(self, kept: _Answered) -> JournalEntry:
        request_id, principal, trace_id, context_id, answer, wall, now, started, chain = kept
        return JournalEntry(
            request_id,
            principal,
            trace_id,
            wall - (now - started),
            round((now - started) * 1000, 3),
            context_id,
            answer,
            node=self.node_id,
            delegation=None if chain is None else delegation_record(chain),
        )


def without_result(answer: Answer) -> Answer:
    """The answer with its `result` replaced by `{"omitted_bytes": <size of the body>}`;
    as it is when it has none (an error, a task)."""
    document = orjson.loads(answer.body)
    if not isinstance(document, dict) or "result" not in document:
        return answer
    document["result"] = {"omitted_bytes": len(answer.body)}
    return dataclasses.replace(answer, body=orjson.dumps(document))
