"""Tasks: asynchronous requests and suspended ones, kept in the backend's queues.

`work` holds accepted asynchronous requests, run by whichever coordinator pulls them.
`suspended` holds requests no instance could take: a coordinator parks them and
replays them when an instance of their capability is available again, until their
time runs out (then a remembered `degraded` answer for a capability declared `safe`, or
an error that says what was true: the instance disabled, or how its last replay
failed). A delegated request is parked no longer than its chain's deadline: its token
could not outlive it (`InvokeService.run_task` ends a replay past it with
`delegation_expired`). Both are durable
queues: a coordinator that dies leaves its entries pending, and once its liveness runs
out (or after `stale_s` untouched) another coordinator takes them over. A task run again
that way is re-sent only to an instance that declared `idempotent` (its own claim,
`InvokeService.run_task`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import structlog
from pydantic import TypeAdapter

from agent_reach.backends.protocols import QueueStore, TaskStore
from agent_reach.cancellation import honour_cancel
from agent_reach.clock import Clock
from agent_reach.errors import StoreUnavailable, UnknownTask
from agent_reach.liveness import CoordinatorLiveness
from agent_reach.model.invocations import InvokeRequest, Status
from agent_reach.model.keys import ANONYMOUS, Principal, owned_key
from agent_reach.observability.metrics import Metrics
from agent_reach.registry.service import Registry
from agent_reach.wire.answer import Answer

log = structlog.get_logger("agent_reach.tasks")

WORK, SUSPENDED = "work", "suspended"
DEFAULT_STALE_S = 30.0  # an entry nobody touched this long belongs to a dead coordinator
TOUCHES_PER_STALE = 6  # held entries are touched this often within the stale window
MAX_REPLAYS = 8  # suspended requests replayed at once: a returning instance is not flooded
# Failures after which a suspended request waits for the next chance instead of ending:
# nobody took it, or the instance it went to could not (gone, declined, failed with an
# answer). A replay whose outcome is unknown (a timeout, a connection lost after the
# request was written: `outcome_unknown` in its error) ends the request with it: sending
# it again could run it twice, even on an instance that declared `idempotent` (its guard
# is its own, and a restarted process has forgotten).
REPLAY_AGAIN = frozenset({"no_instance", "agent_timeout", "agent_error", "agent_unreachable"})
PULL_BLOCK_S = 1.0  # a pull waits this long for new entries before looking around again
REPLAY_CHECK_S = 1.0  # parked requests are looked at least this often
MAX_RUNNING = 256  # asynchronous tasks one coordinator runs at once


@dataclass(slots=True)  # a dataclass, not a model: one is made for every request
class TaskEntry:
    """What travels in a queue: the request and what it needs to run anywhere."""

    task_id: str
    request: InvokeRequest
    trace_id: str
    hop_budget: int
    deadline_ms: int | None = None
    expires_at: float = 0.0  # wall time a suspended entry gives up
    principal: Principal = ANONYMOUS  # checked again when the task runs: rules may change

    @property
    def key(self) -> str:
        """The task's record key: the request id, under its principal."""
        return owned_key(self.principal, self.task_id)


ENTRY = TypeAdapter(TaskEntry)  # how an entry travels in a queue


Runner = Callable[[TaskEntry], Awaitable[Answer]]
# A suspended task whose time ran out, with its last replay's failure (its `error`
# object), if one was made: the answer that ends it.
Expirer = Callable[[TaskEntry, dict[str, Any] | None], Awaitable[Answer]]


@dataclass(slots=True)
class _Parked:
    entry_id: str
    task: TaskEntry
    running: bool = False
    last_failure: dict[str, Any] | None = None  # the last replay's error, while it waits


@dataclass(slots=True)
class TaskBoard:
    """Accepts tasks, answers `GET /v1/tasks/{id}`, and runs its share of both queues."""

    tasks: TaskStore
    queues: QueueStore
    registry: Registry
    clock: Clock
    metrics: Metrics
    node_id: str
    ttl_s: float
    stale_s: float = DEFAULT_STALE_S
    liveness: CoordinatorLiveness | None = None  # entries of dead coordinators: taken at once
    _parked: dict[str, _Parked] = field(default_factory=dict)
    _replays: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(MAX_REPLAYS))
    _held: set[tuple[str, str]] = field(default_factory=set)  # (queue, entry id) being worked

    async def accept(
        self,
        task: TaskEntry,
        status: Status,
        *,
        suspend_s: float = 0.0,
        why: list[dict[str, Any]] | None = None,
    ) -> Answer:
        """Record the task, queue it, and answer 202 with where to poll; a suspended
        task keeps `why` (its `instances`: who could have taken it, and why not)."""
        now = self.clock.wall()
        queue = WORK if status == "queued" else SUSPENDED
        if queue == SUSPENDED:
            chain = task.principal.chain  # its token, and its caller, wait no longer
            until = now + suspend_s if chain is None else min(now + suspend_s, chain.expires_at)
            task = dataclasses.replace(task, expires_at=until)
        document = {
            "task_id": task.task_id,
            "request_id": task.task_id,
            "trace_id": task.trace_id,
            "status": status,
            "created_at": now,
            "updated_at": now,
        }
        if queue == SUSPENDED:
            document["suspended_until"] = task.expires_at
            if why is not None:
                document["instances"] = why
        await self.tasks.put(task.key, orjson.dumps(document), self.ttl_s)
        await self.queues.push(queue, ENTRY.dump_json(task))
        return Answer.of(202, {**document, "poll": f"/v1/tasks/{task.task_id}"})

    async def get(self, principal: Principal, task_id: str) -> dict[str, Any]:
        """The caller's own task (another principal's id reads as unknown)."""
        raw = await self.tasks.get(owned_key(principal, task_id))
        if raw is None:
            raise UnknownTask(f"no task {task_id!r} (unknown or expired)")
        document: dict[str, Any] = orjson.loads(raw)
        return document

    async def run(self, runner: Runner, expirer: Expirer) -> None:
        """Run asynchronous tasks and replay suspended ones, until cancelled."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self._run_work(runner, group))
            group.create_task(self._run_suspended(runner, expirer, group))
            group.create_task(self._touch_forever())

    async def depth(self, queue: str) -> int:
        return await self.queues.depth(queue)

    async def _run_work(self, runner: Runner, group: asyncio.TaskGroup) -> None:
        slots = asyncio.Semaphore(MAX_RUNNING)
        while True:
            await slots.acquire()
            entries = await self._pull(WORK, 1)
            if not entries:
                slots.release()
                continue
            entry_id, task = entries[0]
            group.create_task(self._run_one(entry_id, task, runner, slots))

    async def _run_one(
        self, entry_id: str, task: TaskEntry, runner: Runner, slots: asyncio.Semaphore
    ) -> None:
        try:
            await self._set_status(task, "running")
            await self._finish(WORK, entry_id, task, await runner(task))
        except StoreUnavailable:
            log.warning("task_left_pending", task_id=task.task_id)  # retaken once stale
        finally:
            slots.release()

    async def _run_suspended(
        self, runner: Runner, expirer: Expirer, group: asyncio.TaskGroup
    ) -> None:
        while True:
            for entry_id, task in await self._pull(SUSPENDED, 64, block_s=0.0):
                self._parked[entry_id] = _Parked(entry_id, task)
            now = self.clock.wall()
            for parked in list(self._parked.values()):
                if parked.running:
                    continue
                if now >= parked.task.expires_at:
                    parked.running = True
                    group.create_task(self._expire(parked, expirer))
                elif self._may_run(parked.task):
                    parked.running = True
                    group.create_task(self._replay(parked, runner))
            self.registry.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.registry.changed.wait(), REPLAY_CHECK_S)

    def _may_run(self, task: TaskEntry) -> bool:
        """Worth a replay: a live instance of the capability (text requests always are)."""
        capability = task.request.capability
        if capability is None:
            return True
        now = self.clock.monotonic()
        return any(i.is_live(now) for i in self.registry.index.instances_of(capability))

    async def _replay(self, parked: _Parked, runner: Runner) -> None:
        async with self._replays:
            answer = await runner(parked.task)
        if _may_wait(answer) and self.clock.wall() < parked.task.expires_at:
            parked.last_failure = {**_error(answer), "at": self.clock.wall()}
            parked.running = False  # not yet: it stays parked for the next chance
            return
        self.metrics.fallbacks.labels("replayed").inc()
        await self._settle(parked, answer)

    async def _expire(self, parked: _Parked, expirer: Expirer) -> None:
        await self._settle(parked, await expirer(parked.task, parked.last_failure))

    async def _settle(self, parked: _Parked, answer: Answer) -> None:
        try:
            await self._finish(SUSPENDED, parked.entry_id, parked.task, answer)
        except StoreUnavailable:
            parked.running = False  # tried again at the next look
            return
        self._parked.pop(parked.entry_id, None)

    async def _finish(self, queue: str, entry_id: str, task: TaskEntry, answer: Answer) -> None:
        body = orjson.loads(answer.body)
        status = body.get("status", "error") if answer.status < 400 else "error"
        document = {
            **(await self.get_or_empty(task.key)),
            "task_id": task.task_id,
            "request_id": task.task_id,
            "trace_id": task.trace_id,
            "status": status,
            "http_status": answer.status,
            "answer": body,
            "updated_at": self.clock.wall(),
        }
        await self.tasks.put(task.key, orjson.dumps(document), self.ttl_s)
        await self.queues.ack(queue, entry_id)
        self._held.discard((queue, entry_id))
        log.info("task_finished", task_id=task.task_id, status=status, queue=queue)

    async def get_or_empty(self, task_id: str) -> dict[str, Any]:
        raw = await self.tasks.get(task_id)
        return {} if raw is None else dict(orjson.loads(raw))

    async def _set_status(self, task: TaskEntry, status: Status) -> None:
        document = await self.get_or_empty(task.key)
        document.update(status=status, updated_at=self.clock.wall())
        await self.tasks.put(task.key, orjson.dumps(document), self.ttl_s)

    async def _pull(
        self, queue: str, count: int, *, block_s: float = PULL_BLOCK_S
    ) -> list[tuple[str, TaskEntry]]:
        try:
            raw = await self.queues.pull(
                queue,
                self.node_id,
                count=count,
                block_s=block_s,
                stale_s=self.stale_s,
                dead=self.liveness.dead if self.liveness is not None else (),
            )
        except StoreUnavailable:
            await asyncio.sleep(PULL_BLOCK_S)
            return []
        self._held.update((queue, entry_id) for entry_id, _ in raw)
        return [(entry_id, ENTRY.validate_json(payload)) for entry_id, payload in raw]

    async def _touch_forever(self) -> None:
        """Keep every entry this coordinator holds (running or parked) from going stale."""
        while True:
            await asyncio.sleep(self.stale_s / TOUCHES_PER_STALE)
            for queue in (WORK, SUSPENDED):
                held = [entry_id for q, entry_id in self._held if q == queue]
                if held:
                    with contextlib.suppress(StoreUnavailable):
                        await self.queues.touch(queue, self.node_id, held)
                    honour_cancel()


def _may_wait(answer: Answer) -> bool:
    """Whether a replay's failure may change at the next chance: nobody took it, or its
    instance declined it (503, 429) or failed with a 5xx answer. Not an answer stored for
    the task (`replayed`: it is final, and would only be read again every second), an
    unknown outcome, or a refusal the agent made final (another 4xx)."""
    if answer.replayed or answer.status < 500:
        return False
    error = _error(answer)
    if error.get("code") not in REPLAY_AGAIN or error.get("outcome_unknown") is True:
        return False
    agent_status = error.get("http_status")
    return not isinstance(agent_status, int) or agent_status >= 500 or agent_status == 429


def _error(answer: Answer) -> dict[str, Any]:
    """The answer's `error` object (empty for a success)."""
    error = orjson.loads(answer.body).get("error")
    return error if isinstance(error, dict) else {}
