"""The run board: where runs live, who runs them, and how parked runs resume.

A run is a record in the run store plus an entry in the durable `runs` queue, pushed
at most once per run (a resend re-queues a run whose queuing failed). Some
coordinator pulls the entry and advances the run; while it holds the entry it
touches it, and when it dies (its liveness runs out, or the entry goes stale) another
coordinator takes it over (the task queues' rules, `invoke/tasks.py`), continuing from
the stored record.
A parked run stays held by its coordinator and is resumed when an instance of a
capability it waits for is live again, at most `MAX_RESUMES` at once, until its
parking runs out (then it ends as `error` with its steps' outcomes) or it is
cancelled (then it is advanced once more, to end as `cancelled`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from dataclasses import dataclass, field

import orjson
import structlog
from pydantic import TypeAdapter

from agent_reach.backends.protocols import QueueStore, RunStore
from agent_reach.cancellation import honour_cancel
from agent_reach.clock import Clock
from agent_reach.errors import StoreUnavailable
from agent_reach.invoke.tasks import PULL_BLOCK_S, TOUCHES_PER_STALE
from agent_reach.liveness import CoordinatorLiveness
from agent_reach.model.workflows import FINAL_RUNS, RunRecord
from agent_reach.observability.metrics import Metrics
from agent_reach.observability.tracing import Tracer
from agent_reach.orchestration.planning import Plan
from agent_reach.orchestration.running import Cancelled, RunExecutor, Save
from agent_reach.orchestration.steps import TEXT
from agent_reach.registry.service import Registry

log = structlog.get_logger("agent_reach.orchestration")

RUNS = "runs"
MAX_RUNNING = 256  # runs one coordinator advances at once (the task board's figure)
MAX_RESUMES = 8  # parked runs resumed at once: a returning instance is not flooded
RECENT_RUNS = 200  # runs the dashboard can list
RESUME_CHECK_S = 0.25  # parked runs are looked at this often (in memory: cheap)
MAX_FRESH = 1024  # runs created here and not yet pulled, kept as objects
WAIT_POLL_FIRST_S = 0.02  # a caller waiting for a run another coordinator holds polls ...
WAIT_POLL_MAX_S = 0.25  # ... backing off to a quarter second

_RECORD = TypeAdapter(RunRecord)


def dump_record(record: RunRecord) -> bytes:
    return orjson.dumps(record)


def load_record(raw: bytes) -> RunRecord:
    return _RECORD.validate_json(raw)


@dataclass(slots=True)
class RunBoard:
    """Accepts runs, advances its share of them, and answers callers waiting for one."""

    store: RunStore
    queues: QueueStore
    registry: Registry
    executor: RunExecutor
    clock: Clock
    metrics: Metrics
    tracer: Tracer
    node_id: str
    ttl_s: float
    stale_s: float
    liveness: CoordinatorLiveness | None = None  # runs of dead coordinators: taken at once
    _held: set[str] = field(default_factory=set)
    _parked: dict[str, str] = field(default_factory=dict)  # entry id -> run key
    _waiters: dict[str, set[asyncio.Event]] = field(default_factory=dict)
    # Records this coordinator holds as objects: runs it created (until it pulls them) and
    # runs it settled (until their waiters read them), so neither is decoded again here.
    _fresh: OrderedDict[str, tuple[RunRecord, Plan]] = field(default_factory=OrderedDict)
    _settled_runs: dict[str, RunRecord] = field(default_factory=dict)
    _resumes: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(MAX_RESUMES))

    async def submit(self, key: str, record: RunRecord, dag: Plan) -> bool:
        """Store a new run (`dag` its plan) and queue it; False, queuing nothing, when
        `key` exists."""
        raw = dump_record(record)
        if not await self.store.create(key, raw, self.ttl_s, keep_recent=RECENT_RUNS):
            return False
        self._fresh[key] = (record, dag)
        while len(self._fresh) > MAX_FRESH:  # another coordinator pulled the oldest ones
            self._fresh.popitem(last=False)
        await self.enqueue(key)
        return True

    async def enqueue(self, key: str) -> None:
        """Queue the stored run `key` unless it was queued already. `submit` does it; a
        resend does it again for a run still pending, whose queuing may have failed after
        its record was stored (the caller got 503): queued twice, it would run twice."""
        await self.queues.push_once(RUNS, key.encode(), once=key, ttl_s=self.ttl_s)

    async def load(self, key: str) -> RunRecord | None:
        raw = await self.store.get(key)
        return None if raw is None else load_record(raw)

    async def wait(self, key: str, wait_s: float, *, is_new: bool = False) -> RunRecord | None:
        """The run once it is final or parked, or as it stands after `wait_s`.

        `is_new`: the caller has just submitted it, so there is nothing to read yet.
        """
        until = self.clock.monotonic() + wait_s
        event = asyncio.Event()
        self._waiters.setdefault(key, set()).add(event)
        pause = WAIT_POLL_FIRST_S
        record: RunRecord | None = None
        try:
            while True:
                event.clear()
                if not is_new:
                    record = self._settled_runs.get(key) or await self.load(key)
                    if record is None or record.status in FINAL_RUNS or record.status == "parked":
                        return record
                is_new = False
                left = until - self.clock.monotonic()
                if left <= 0:
                    return record or await self.load(key)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), min(pause, left))
                pause = min(WAIT_POLL_MAX_S, pause * 2)
        finally:
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[key]
                    self._settled_runs.pop(key, None)

    async def run(self) -> None:
        """Advance queued and taken-over runs and resume parked ones, until cancelled."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self._pull_forever(group))
            group.create_task(self._resume_forever(group))
            group.create_task(self._touch_forever())

    async def _pull_forever(self, group: asyncio.TaskGroup) -> None:
        slots = asyncio.Semaphore(MAX_RUNNING)
        while True:
            await slots.acquire()
            try:
                entries = await self.queues.pull(
                    RUNS,
                    self.node_id,
                    count=1,
                    block_s=PULL_BLOCK_S,
                    stale_s=self.stale_s,
                    dead=self.liveness.dead if self.liveness is not None else (),
                )
            except StoreUnavailable:
                slots.release()
                await asyncio.sleep(PULL_BLOCK_S)
                continue
            if not entries:
                slots.release()
                continue
            entry_id, raw_key = entries[0]
            self._held.add(entry_id)
            group.create_task(self._drive(entry_id, raw_key.decode(), slots))

    async def _drive(self, entry_id: str, key: str, slots: asyncio.Semaphore | None) -> None:
        """Advance one run as far as it goes, then ack it (final) or keep it parked."""
        try:
            fresh = self._fresh.pop(key, None) if slots is not None else None
            record, dag = fresh if fresh is not None else (await self.load(key), None)
            if record is not None and record.status not in FINAL_RUNS:
                if record.status in ("running", "parked") and slots is not None:
                    record.takeovers += 1  # pulled mid-run: its holder stopped touching it
                await self.executor.advance(record, self._saver(key), self._cancelled(key), dag)
                self._settled(key, record)
            if record is None or record.status in FINAL_RUNS:
                await self.queues.ack(RUNS, entry_id)
                self._held.discard(entry_id)
                self._parked.pop(entry_id, None)
            else:
                self._parked[entry_id] = key
        except StoreUnavailable:
            log.warning("run_left_pending", run=key)  # retaken once stale
            self._held.discard(entry_id)
            self._parked.pop(entry_id, None)
        except Exception:  # a bug: logged, and the board goes on with the other runs
            log.exception("run_failed", run=key)
            self._held.discard(entry_id)
            self._parked.pop(entry_id, None)
        finally:
            if slots is not None:
                slots.release()

    def _saver(self, key: str) -> Save:
        async def save(record: RunRecord) -> None:
            await self.store.put(key, dump_record(record), self.ttl_s)
            if record.status in FINAL_RUNS or record.status == "parked":
                self._notify(key, record)  # waiters want the end, not every step

        return save

    def _cancelled(self, key: str) -> Cancelled:
        async def cancelled() -> bool:
            return await self.store.is_cancelled(key)

        return cancelled

    async def cancel(self, key: str) -> bool:
        """Mark the run cancelled (for as long as runs are kept); False when it was already.
        Whoever holds it sees the mark before it starts another step; a parked run is
        looked at within `RESUME_CHECK_S`, a queued one when it is pulled."""
        return await self.store.cancel(key, self.ttl_s)

    def _settled(self, key: str, record: RunRecord) -> None:
        """Count and trace a run that reached a final status or parked."""
        self.metrics.child(self.metrics.workflow_runs, record.status).inc()
        if record.status == "parked":
            return
        elapsed_s = max(0.0, self.clock.wall() - record.created_at)
        self.metrics.workflow_run_seconds.observe(elapsed_s)
        self.tracer.record(
            "workflow",
            record.name or record.workflow.get("intent") or "workflow",
            trace_id=record.trace_id,
            parent_id=record.parent_span_id,
            started=self.clock.monotonic() - elapsed_s,
            status=record.status,
            span_id=record.span_id,
            note=record.run_id,
            principal=record.principal.name,
        )

    def _notify(self, key: str, record: RunRecord) -> None:
        waiters = self._waiters.get(key)
        if waiters:
            self._settled_runs[key] = record
            for event in waiters:
                event.set()

    async def _resume_forever(self, group: asyncio.TaskGroup) -> None:
        resuming: set[str] = set()
        while True:
            for entry_id, key in list(self._parked.items()):
                if entry_id in resuming:
                    continue
                resuming.add(entry_id)
                group.create_task(self._look_at(entry_id, key, resuming))
            # Polled, not woken by `registry.changed`: the task board clears that event,
            # and two consumers clearing one event would each miss the other's wake-ups.
            await asyncio.sleep(RESUME_CHECK_S)

    async def _look_at(self, entry_id: str, key: str, resuming: set[str]) -> None:
        """Expire a parked run whose time ran out, end a cancelled one, resume one whose
        capability is back."""
        try:
            record = await self.load(key)
            if record is None or record.status != "parked":
                await self._drive(entry_id, key, None)
            elif self.clock.wall() >= (record.parked_until or record.deadline_at):
                await self._expire(entry_id, key, record)
            elif await self.store.is_cancelled(key):  # advanced once more, to its end
                self._parked.pop(entry_id, None)
                await self._drive(entry_id, key, None)
            elif self._may_resume(record):
                async with self._resumes:
                    self._parked.pop(entry_id, None)
                    record.resumes += 1
                    await self.store.put(key, dump_record(record), self.ttl_s)
                    await self._drive(entry_id, key, None)
        except StoreUnavailable:
            pass  # looked at again next time
        finally:
            resuming.discard(entry_id)

    def _may_resume(self, record: RunRecord) -> bool:
        """Worth a resume: some capability a parked step waits for has a live instance."""
        now = self.clock.monotonic()
        for state in record.steps:
            if state.status != "parked":
                continue
            for capability, outcome in state.tried.items():
                if outcome != "no_instance":
                    continue
                if capability == TEXT:  # routed anew each time, like a suspended text request
                    return True
                if any(i.is_live(now) for i in self.registry.index.instances_of(capability)):
                    return True
        return False

    async def _expire(self, entry_id: str, key: str, record: RunRecord) -> None:
        """Parking ran out: the parked steps fail and the run ends with what it has."""
        for state in record.steps:
            if state.status == "parked":
                state.status = "failed"
                state.reason = f"{state.reason}; none became available before parking ran out"
        record.parked_until = self.clock.wall()  # nothing is left to wait for
        await self.executor.advance(record, self._saver(key), self._cancelled(key))
        self._settled(key, record)
        await self.queues.ack(RUNS, entry_id)
        self._held.discard(entry_id)
        self._parked.pop(entry_id, None)

    async def _touch_forever(self) -> None:
        """Keep every run this coordinator holds (running or parked) from going stale."""
        while True:
            await asyncio.sleep(self.stale_s / TOUCHES_PER_STALE)
            if self._held:
                with contextlib.suppress(StoreUnavailable):
                    await self.queues.touch(RUNS, self.node_id, list(self._held))
                honour_cancel()
