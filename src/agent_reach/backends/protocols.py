"""The seams between the areas and the state they share: one protocol per concern.

Each method's docstring is its contract: what is atomic, what expires and when.
Implementations raise `StoreUnavailable` (never a driver error) when they cannot answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from agent_reach.model.agents import AgentSpec, HealthStatus
from agent_reach.model.keys import KeyRecord

OFFLINE_RETENTION_S = 600.0  # an instance whose lease ran out stays listed as offline this long


@dataclass(frozen=True, slots=True)
class InstanceRecord:
    """What the registry stores for one instance: its spec, when it registered, and who
    registered it (the principal that alone may renew, change or remove it)."""

    spec: AgentSpec
    registered_at: float
    owner: str | None = None


@dataclass(frozen=True, slots=True)
class LeasedRecord:
    """A stored record and what is left of its lease (0 when it has run out)."""

    record: InstanceRecord
    lease_left_s: float


@dataclass(frozen=True, slots=True)
class RegistryEvent:
    """A change made by some coordinator.

    `lease_left_s` is set for `put` and `renew`, `record` for `put`, `health` for
    `health` (a health state some coordinator's checks moved the instance to).
    `resync` (no agent, no origin) says the watch has just (re)connected: changes may
    have been missed, or the store may have lost its data (a restart without
    persistence); the listener reloads.
    """

    op: Literal["put", "renew", "remove", "health", "resync"]
    agent_id: str
    origin: str
    record: InstanceRecord | None = None
    lease_left_s: float = 0.0
    health: HealthStatus | None = None


RegistryListener = Callable[[RegistryEvent], Awaitable[None] | None]


class RegistryStore(Protocol):
    """Registered instances and their leases."""

    async def put(self, record: InstanceRecord, origin: str) -> None:
        """Store or replace the record and start a fresh lease of ``spec.ttl`` seconds.

        Atomic: record, lease and listing change together. The record itself is kept
        `OFFLINE_RETENTION_S` past the end of its lease, so listings can show it offline.
        """

    async def renew(self, agent_id: str, origin: str) -> float | None:
        """Extend a live lease by its ttl and return the ttl in seconds.

        Returns None, changing nothing, when the id is unknown or its lease has run
        out (the agent must register again). Atomic check-and-extend.
        """

    async def remove(self, agent_id: str, origin: str) -> bool:
        """Delete record and lease at once; False when there was nothing to delete."""

    async def load(self) -> list[LeasedRecord]:
        """Every retained record with what is left of its lease, in one consistent read."""

    async def version(self) -> int:
        """A number that changes whenever a record is stored or removed (0 for a store
        that has none yet): one cheap read tells whether a `load` would find news.
        Leases renewed or run out do not change it."""

    async def get(self, agent_id: str) -> InstanceRecord | None:
        """One retained record (lease live or not), read from the store itself."""

    async def announce_health(self, agent_id: str, health: HealthStatus, origin: str) -> None:
        """Tell every other coordinator that `agent_id` moved to `health` (no state is stored)."""

    async def watch(self, listener: RegistryListener) -> None:
        """Call `listener` for every change any coordinator makes, until cancelled.

        Changes made before the call are not replayed: call `load` after `watch` has
        started to get a complete view. A `resync` event follows every (re)subscription.
        Returns at once when the store is not shared.
        """


@dataclass(frozen=True, slots=True)
class Claim:
    """What `IdempotencyStore.claim` found.

    `claimed`: the caller now owns the key and must `complete` or `release` it with
    `fence`. `completed`: the stored answer (`status`, `body`, byte for byte).
    `in_progress`: another owner holds a live lease. `mismatch`: the key was used
    with a different request body (its `fingerprint` differs). A `claimed` key taken
    over from an earlier owner carries the instances that owner noted in `sent_to`.
    """

    state: Literal["claimed", "completed", "in_progress", "mismatch"]
    fence: int = 0
    status: int = 0
    body: bytes = b""
    sent_to: tuple[str, ...] = ()
    node: str = ""  # `in_progress`: the coordinator holding the claim ("" when not said)


class IdempotencyStore(Protocol):
    """Request ids and their answers, so that a repeated id never executes twice."""

    async def claim(
        self,
        key: str,
        fingerprint: str,
        lease_s: float,
        *,
        node: str = "",
        takeover_from: str | None = None,
    ) -> Claim:
        """One atomic step deciding who executes `key`, for coordinator `node`.

        No record: create an in-progress record with a lease of `lease_s` -> `claimed`
        with a new fence. A completed record -> `completed`. An in-progress record whose
        lease is live -> `in_progress` naming its `node`, unless that node is
        `takeover_from` (a coordinator whose liveness ran out). One whose lease ran out
        (its owner died, or gave it back after reaching an agent), or whose node is
        `takeover_from`, is taken over -> `claimed` with a higher fence and the record's
        `sent_to`. Any record whose fingerprint differs -> `mismatch`, changing nothing.
        """

    async def note_sent(self, key: str, fence: int, agent_id: str) -> None:
        """Add `agent_id` to the instances the key was delivered to, while `fence` owns it."""

    async def complete(self, key: str, fence: int, status: int, body: bytes, ttl_s: float) -> bool:
        """Store the final answer for `ttl_s` only while `fence` still owns the key.

        Compare-and-set: False, writing nothing, when another owner took the key over.
        """

    async def release(self, key: str, fence: int, *, forget: bool = False) -> None:
        """Give back an in-progress claim still owned by `fence`, so the id may run again.

        A claim with no `sent_to` (or given back with `forget`: no agent acted on it) is
        forgotten. One that reached an agent keeps its record with the lease ended: the
        next claim takes it over with its `sent_to`.
        """

    async def peek(self, key: str) -> Claim | None:
        """The key's state without claiming it: None when there is no record."""


class LivenessStore(Protocol):
    """Each coordinator's liveness record: renewed every second or so, expiring soon after."""

    async def beat(self, node: str, ttl_s: float) -> frozenset[str]:
        """Renew `node`'s record for `ttl_s` and return the nodes whose records ran out.

        One atomic step, on the store's own clock. A node whose record ran out is listed
        until `LIVENESS_RETENTION_S` after that (then forgotten); beating again revives it.
        """


LIVENESS_RETENTION_S = 3600.0  # a dead coordinator is listed this long after its record ran out


class TaskStore(Protocol):
    """Asynchronous and suspended tasks: their state and final answer, by task id."""

    async def put(self, task_id: str, document: bytes, ttl_s: float) -> None:
        """Store (or replace) the task's JSON document; it expires after `ttl_s`."""

    async def get(self, task_id: str) -> bytes | None:
        """The task's document, or None when unknown or expired."""


class QueueStore(Protocol):
    """Durable work queues shared by every coordinator (Redis Streams, consumer groups).

    An entry is handed to one consumer at a time and stays pending until acked; when
    its consumer stops touching it for `stale_s` (it died), `pull` hands it to another.
    """

    async def push(self, queue: str, payload: bytes) -> str:
        """Append an entry; returns its id."""

    async def push_once(self, queue: str, payload: bytes, once: str, ttl_s: float) -> bool:
        """Append an entry unless one was pushed under the same `once` within `ttl_s`;
        True when this call appended it. One atomic step: of calls racing (or re-sent
        after a lost reply), exactly one appends."""

    async def pull(
        self,
        queue: str,
        consumer: str,
        *,
        count: int,
        block_s: float,
        stale_s: float,
        dead: Collection[str] = (),
    ) -> list[tuple[str, bytes]]:
        """Up to `count` entries for `consumer`: those held by the `dead` consumers (their
        liveness ran out) and stale ones first, then new ones, waiting up to `block_s`
        when there are none."""

    async def touch(self, queue: str, consumer: str, entry_ids: list[str]) -> None:
        """Keep entries this consumer still holds from going stale."""

    async def ack(self, queue: str, entry_id: str) -> None:
        """The entry is done: it leaves the queue for good."""

    async def depth(self, queue: str) -> int:
        """Entries pushed and not yet acked."""


class JournalStore(Protocol):
    """Capped append-only logs (dead letters): newest kept, oldest dropped past `cap`."""

    async def append(self, name: str, payload: bytes, cap: int) -> None:
        """Add an entry, dropping the oldest beyond `cap` entries."""

    async def recent(self, name: str, limit: int) -> list[bytes]:
        """Up to `limit` entries, newest first."""

    async def count(self, name: str) -> int:
        """How many entries the log holds."""


class AnswerCache(Protocol):
    """Earlier successful answers by capability and payload, for the `degraded` fallback."""

    async def put(self, key: str, body: bytes, ttl_s: float) -> None:
        """Remember `body` for `key` for `ttl_s` seconds (a newer answer replaces it)."""

    async def get(self, key: str) -> bytes | None:
        """The remembered answer, or None."""


class LearningStore(Protocol):
    """What the router learns from, shared by every coordinator: the texts it routed (so
    their callers can correct them) and the examples learned from corrections and 421s."""

    async def put_text(self, request_id: str, document: bytes, ttl_s: float) -> None:
        """Remember a routed text request for `ttl_s` seconds (the same id replaces it)."""

    async def get_text(self, request_id: str) -> bytes | None:
        """The routed text request, or None when unknown or expired."""

    async def add_example(
        self, example_id: str, capability: str, document: bytes, *, ttl_s: float, keep: int
    ) -> None:
        """Store or replace a learned example for `ttl_s` seconds; in the same atomic step
        the capability keeps only its `keep` newest examples and the version changes."""

    async def examples(self) -> list[bytes]:
        """Every unexpired learned example."""

    async def delete_example(self, example_id: str) -> bool:
        """Forget one example (the version changes); False when there was none."""

    async def version(self) -> int:
        """Changes with every add and delete (not when an example expires)."""


class KeyStore(Protocol):
    """API key records by key id; a record holds a digest, never the key itself."""

    async def put(self, record: KeyRecord) -> None:
        """Store (or replace) the record."""

    async def get(self, key_id: str) -> KeyRecord | None:
        """The record, revoked or not; None when there is none."""

    async def revoke(self, key_id: str) -> bool:
        """Mark the record revoked (it stays, for audit); False when there is none."""

    async def list(self) -> list[KeyRecord]:
        """Every record, revoked ones included."""


@dataclass(frozen=True, slots=True)
class StoredPolicy:
    """The shared policy: its JSON document, content `version`, a `revision`
    counter, and the digest of the policy file it last took (None: never from a file)."""

    revision: int
    version: str
    document: bytes
    file_digest: str | None = None


@dataclass(frozen=True, slots=True)
class PolicyChange:
    """One audit record: who replaced the policy, when, and its versions before and after.

    `source` is `api`, `file`, `defaults` (the first policy of an empty store) or
    `restored` (a coordinator put its policy back into a store that lost it).
    """

    revision: int
    at: float
    by: str
    source: str
    before: str | None
    after: str


class PolicyStore(Protocol):
    """The policy every coordinator follows, and the audit log of its changes."""

    async def get(self) -> StoredPolicy | None:
        """The stored policy; None when none was ever stored (or the store lost it)."""

    async def replace(
        self,
        document: bytes,
        version: str,
        *,
        change: PolicyChange,
        expected_revision: int | None = None,
        file_digest: str | None = None,
    ) -> PolicyChange | None:
        """Store the policy as the next revision and append its audit record, atomically.

        Refused (None, nothing written) when `expected_revision` is given and is not the
        stored revision (0: nothing stored), or when `file_digest` is given and the store
        already took that file content. `change` supplies `at`, `by` and `source`; the
        store fills in `revision` and `before`. The file digest stays when None is given.
        """

    async def changes(self, limit: int) -> list[PolicyChange]:
        """Up to `limit` audit records, newest first (the oldest beyond a cap are dropped)."""


class QuotaStore(Protocol):
    """Token buckets shared by every coordinator, so together they never over-admit."""

    async def take(self, key: str, rate_per_s: float, burst: int) -> float:
        """Take one token from the bucket `key` in one atomic step.

        Returns 0 when a token was taken, else the seconds until one will be there
        (nothing taken). A bucket starts full (`burst` tokens) and refills at
        `rate_per_s`; time is the store's own clock, so coordinators' clocks do not matter.
        """


class FleetLoadStore(Protocol):
    """Each coordinator's in-flight count per instance, so load is seen fleet-wide."""

    async def exchange(
        self, node_id: str, counts: dict[str, int], stale_s: float
    ) -> dict[str, int]:
        """Publish `node_id`'s counts and read the others', in one atomic step.

        Replaces the node's previous counts; returns, per instance, the sum of every
        other node's counts published within `stale_s` by the store's own clock (older
        ones are dropped, so a dead coordinator's load vanishes).
        """


@dataclass(frozen=True, slots=True)
class SegmentPolicy:
    """How appended lists are cut into segments, and how many live segments a context keeps.

    A segment is full at `items` items, or when the next item would take it past
    `max_bytes` (a segment always takes at least one item). `max_segments` counts the
    live segments of all of one context's lists together.
    """

    items: int
    max_bytes: int
    max_segments: int


@dataclass(frozen=True, slots=True)
class StoredContext:
    """One consistent read of a context.

    `document` is the JSON object as last written (appended lists are not in it).
    `lists` maps each list that was asked for to the items of its live segments, oldest
    first; `list_names` names every list of the context, loaded or not. `expires_in_s`
    is the context's remaining life after this read renewed it; `segments_read` and
    `bytes_read` say what the read loaded.
    """

    document: bytes
    version: int
    expires_in_s: float
    lists: dict[str, list[bytes]]
    list_names: frozenset[str]
    segments_read: int
    bytes_read: int


@dataclass(frozen=True, slots=True)
class ContextWrite:
    """What a context write did.

    `written`: `version` is the new version, `expires_in_s` the renewed life. Refusals
    change nothing: `missing` (no live context), `conflict` (`version` is the stored
    one), `not_a_list` (an append to a field of the document), `too_many_segments`.
    """

    state: Literal["written", "missing", "conflict", "not_a_list", "too_many_segments"]
    version: int = 0
    expires_in_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Swept:
    """What one `ContextStore.sweep` removed."""

    contexts: int
    segments: int


class ContextStore(Protocol):
    """Context documents with a version and a ttl, and appended lists cut into segments.

    A context lives `ttl_s` past its last read or write; a segment lives `ttl_s` past
    the last append to it, so a long session keeps its document and its recent items
    while old items expire. Renewing never shortens an expiry that `hold` raised.
    """

    async def create(
        self,
        context_id: str,
        document: bytes,
        names: Collection[str],
        ttl_s: float,
        access: bytes = b"",
    ) -> bool:
        """Store a new context at version 1 living `ttl_s`; False, changing nothing, if taken.

        `names` are the document's top-level field names: appends to them are refused.
        `access` (who owns the context and who it is shared with, opaque here) is kept
        as given for the context's whole life; nothing changes it.
        """

    async def access(self, context_id: str) -> bytes | None:
        """The `access` bytes the context was created with (b"" when none were given);
        None when the context is missing or expired. Does not renew the context."""

    async def read(self, context_id: str, lists: Collection[str] | None) -> StoredContext | None:
        """The document and the live segments of `lists` (None: every list), consistently.

        None when the context is missing or expired. Segments of other lists are not
        loaded. Renews the context (not its segments) for another `ttl_s`.
        """

    async def write(
        self,
        context_id: str,
        document: bytes,
        names: Collection[str],
        *,
        version: int,
        drop_lists: Collection[str] = (),
    ) -> ContextWrite:
        """Replace the document only while the stored version is `version` (compare-and-set).

        Written: the version goes up by one, the lists in `drop_lists` are deleted with
        their segments, and the context is renewed, all at once.
        """

    async def append(
        self,
        context_id: str,
        name: str,
        items: Sequence[bytes],
        *,
        version: int | None,
        policy: SegmentPolicy,
    ) -> ContextWrite:
        """Append `items` to the list `name`, all or none, in one atomic step.

        Items fill the list's current segment until `policy` says it is full, then new
        segments; every segment written, and the context, live another `ttl_s`. The
        version goes up by one. `conflict` when `version` is given and is not the
        stored one; `too_many_segments` when the context would hold more than
        `policy.max_segments` live segments.
        """

    async def delete(self, context_id: str) -> bool:
        """Delete the context and all its segments at once; False when there was none."""

    async def hold(self, context_ids: Collection[str], hold_s: float) -> int:
        """Keep these contexts and their live segments at least `hold_s` seconds more.

        Raises every expiry that would come sooner to `hold_s` from now, never lowers
        one; atomic per context. Returns how many of the contexts exist.
        """

    async def sweep(self) -> Swept:
        """Remove expired contexts and segments and say how many went.

        Atomic per context. A store whose entries expire by themselves (Redis) has
        nothing to do and returns zeros.
        """

    async def shared_secret(self, candidate: bytes) -> bytes:
        """The token key every coordinator on this store shares.

        Stores `candidate` unless a key is stored already (set-if-absent, atomic), then
        returns the stored key; it never expires.
        """


class RunStore(Protocol):
    """Workflow runs: each run's JSON record by key, and the keys of the newest runs."""

    async def create(self, key: str, record: bytes, ttl_s: float, *, keep_recent: int) -> bool:
        """Store a new run's record for `ttl_s`; False, changing nothing, when `key` is taken.

        Set-if-absent and, when stored, `key` joins the front of the recent list, which
        keeps only the `keep_recent` newest keys: one atomic step.
        """

    async def put(self, key: str, record: bytes, ttl_s: float) -> None:
        """Replace the run's record (last writer wins); it expires after `ttl_s`."""

    async def get(self, key: str) -> bytes | None:
        """The run's record, or None when unknown or expired."""

    async def recent(self, limit: int) -> list[str]:
        """Up to `limit` keys of the newest runs created, newest first (some may have expired)."""

    async def cancel(self, key: str, ttl_s: float) -> bool:
        """Mark the run cancelled for `ttl_s` (a mark of its own: the record's writer
        cannot overwrite it); True when this call marked it, False when it was already."""

    async def is_cancelled(self, key: str) -> bool:
        """Whether the run was marked cancelled (read at every step start: once a cancel
        has returned, no step starts)."""


class WorkflowStore(Protocol):
    """Named workflow definitions by key; they do not expire."""

    async def put(self, key: str, definition: bytes) -> None:
        """Store (or replace) the definition saved under `key`."""

    async def get(self, key: str) -> bytes | None:
        """The definition, or None when nothing is saved under `key`."""


class KeySetStore(Protocol):
    """Key sets by name (an IdP's fetched JWKS, the coordinator's own signing keys), shared
    by every coordinator of a backend so one refresh serves them all."""

    async def put(self, name: str, document: bytes, ttl_s: float) -> None:
        """Store `document` under `name` for `ttl_s` seconds (replacing what was there)."""

    async def get(self, name: str) -> bytes | None:
        """The document, or None when none is stored or it has expired."""

    async def put_new(self, name: str, document: bytes, ttl_s: float) -> bytes:
        """Store `document` unless a live one is there; the stored one either way (the
        first of several coordinators racing to create a key wins, atomically)."""


class MeshStore(Protocol):
    """The mesh's shared state: the agents an admin disabled (the kill switch) and what
    each delegation chain has spent of its budget."""

    async def set_disabled(self, agent_id: str, record: bytes | None) -> bool:
        """Disable `agent_id` (with a record of who and when) or, with None, enable it;
        whether that changed anything."""

    async def disabled(self) -> dict[str, bytes]:
        """Every disabled agent id and its record."""

    async def spend(self, chain: str, amount: float, limit: float, ttl_s: float) -> float | None:
        """Add `amount` to what `chain` has spent unless that would pass `limit`: the new
        total, or None (nothing added). The total lives `ttl_s` after its last spend."""


class QualityStore(Protocol):
    """The outcome ledger shared by every coordinator (mesh/quality.py): counters in time
    buckets of a series, and what each served request was, for its ratings."""

    async def add(self, series: str, bucket: int, counts: Mapping[str, int], ttl_s: float) -> None:
        """Add `counts` (field -> n) to `bucket` of `series`; the bucket expires `ttl_s`
        after its last write. Not atomic across fields (a reader may see part of it)."""

    async def totals(self, series: str, buckets: Sequence[int]) -> dict[str, int]:
        """Every field's sum over `buckets` of `series` (missing buckets count 0)."""

    async def put_served(self, records: Sequence[tuple[str, bytes]], ttl_s: float) -> None:
        """Keep each `(request_id, record)` for `ttl_s` (one pipelined round trip)."""

    async def served(self, request_id: str) -> bytes | None:
        """The record kept for `request_id`; None when none or expired."""

    async def claim_rating(self, request_id: str, ttl_s: float) -> bool:
        """True the first time a request is rated (within `ttl_s`), False after."""


class WhyStore(Protocol):
    """What `agent-reach why` keeps of answered requests for every coordinator to read: a
    short list of records per request id, expiring as a whole (shared backends only)."""

    async def add(self, records: Sequence[tuple[str, bytes]], cap: int, ttl_s: float) -> None:
        """Append each `(request_id, record)` to its request's list, keeping the newest
        `cap`; a list expires `ttl_s` after its last write. One pipelined round trip, not
        atomic across requests (a reader may see part of a batch)."""

    async def get(self, request_id: str) -> list[bytes]:
        """The request's records, oldest first; empty when none or expired."""


class A2AStore(Protocol):
    """The A2A face's tasks, listed per owner, and the push-notification configs clients
    set on them; shared by every coordinator of a backend."""

    async def put_task(
        self, owner: str, task_id: str, document: bytes, created_at: float, ttl_s: float
    ) -> None:
        """Store (or replace) the owner's task; it expires after `ttl_s` and until then
        `list_tasks` lists it by `created_at`."""

    async def get_task(self, owner: str, task_id: str) -> bytes | None:
        """The owner's task; None when unknown, expired or another owner's."""

    async def list_tasks(self, owner: str, limit: int) -> list[bytes]:
        """Up to `limit` of the owner's live tasks, newest first."""

    async def put_push(
        self, owner: str, task_id: str, config_id: str, document: bytes, ttl_s: float
    ) -> None:
        """Store (or replace) a push config of the task (all its configs expire together,
        `ttl_s` after the last write); the task joins the set `watched` returns."""

    async def list_push(self, owner: str, task_id: str) -> dict[str, bytes]:
        """config id -> config of the task; empty when none."""

    async def delete_push(self, owner: str, task_id: str, config_id: str) -> bool:
        """Remove one config; True when it existed."""

    async def watched(self) -> list[tuple[str, str]]:
        """(owner, task id) of every task given a push config and not yet `unwatch`ed."""

    async def unwatch(self, owner: str, task_id: str) -> None:
        """The task needs no more pushes (it ended, or its configs are gone)."""

    async def claim_update(self, key: str, ttl_s: float) -> bool:
        """True for exactly one caller per key until it expires: of coordinators racing
        to push the same update, one does."""


class EmbeddingStore(Protocol):
    """Sentence vectors of card texts by (model, text), shared by every coordinator of a
    backend, so that a refit or a restart does not ask the embedding service again."""

    async def get_many(self, model: str, texts: Sequence[str]) -> list[bytes | None]:
        """The stored vector of each text under `model` (None where none), in order."""

    async def put_many(self, model: str, vectors: Sequence[tuple[str, bytes]]) -> None:
        """Store each `(text, vector)` under `model`; an entry lives `EMBEDDING_TTL_S`
        after its last put (memory: until the store's byte bound evicts it, oldest first).
        One pipelined round trip, not atomic across texts."""
