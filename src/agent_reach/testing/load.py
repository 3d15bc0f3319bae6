"""Open-loop load with a Jepsen-style history, and the checker that joins it with ledgers.

`LoadRun` sends invocations on a fixed arrival schedule (so queueing shows as
latency instead of slowing the sender down) from its own thread and event loop,
over pooled keep-alive HTTP/1.1 (`HttpPool`), and keeps one `Record` per request.
Faults injected meanwhile are written into the same `History` with `mark`.
`check` joins the history with the agents' ledgers and a coordinator's health
marks into a `Report`: lost requests, duplicate executions,
success, latency percentiles, amplification, codes by count.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Self

import orjson
import uvloop

from agent_reach.clock import SYSTEM_CLOCK
from agent_reach.testing.agent_process import HealthMark, LedgerRow
from agent_reach.wire.pool import HttpPool, PoolError, Response

GRACE_S = 1.0  # a request with no answer by its deadline + 1 s is lost
LATE_S = 0.05  # every request should finish by its deadline + 50 ms
FAILOVER_PAUSE_S = 0.1  # a client waits this long before sending the same request_id again
TASK_POLL_S = 0.2  # accepted tasks are looked at this often until they finish
TASK_POLLS_AT_ONCE = 32  # bounded, so polling does not become the load
NOT_JSON = "not_json"  # code of an answer whose body is no JSON object (a bare 500)
SUCCESS_CODES = frozenset({"ok", "fallback"})  # answered by an agent (not `degraded`)


@dataclass(frozen=True, slots=True)
class AttemptSeen:
    """One attempt as an answer reports it."""

    agent_id: str
    number: int
    outcome: str


@dataclass(slots=True)
class Record:
    """One request of the history; wall-clock times, comparable with logs and ledgers.

    `answer_t` is the last answer to a send (a 202 counts); `complete_t` the final
    outcome (for a task, when it was seen finished); `task_id` is set when the request
    was answered with a task. `code` is the answer's `status` (`ok`,
    `fallback`, `suspended`...) or its error code; `no_answer` when nothing came.
    """

    request_id: str
    invoke_t: float
    deadline_s: float
    answer_t: float | None = None
    complete_t: float | None = None
    status: int | None = None
    code: str = "no_answer"
    agent_id: str | None = None
    attempts: list[AttemptSeen] = field(default_factory=list)
    tries: int = 0
    coordinator: str | None = None
    task_id: str | None = None

    @property
    def is_success(self) -> bool:
        """Finished with a 2xx an agent gave."""
        return self.complete_t is not None and self.code in SUCCESS_CODES

    @property
    def latency_s(self) -> float | None:
        return None if self.answer_t is None else self.answer_t - self.invoke_t

    def take(self, status: int, answer: dict[str, Any], now: float) -> None:
        """Adopt an invoke answer (or a finished task's answer)."""
        error = answer.get("error")
        self.status = status
        self.code = error.get("code", "error") if isinstance(error, dict) else answer["status"]
        source = error if isinstance(error, dict) else answer
        self.agent_id = source.get("agent_id")
        self.attempts = [
            AttemptSeen(a["agent_id"], a["number"], a["outcome"])
            for a in source.get("attempts") or []
        ]
        if status == 202:
            self.task_id = answer["task_id"]  # kept once finished: this request was a task
        self.complete_t = None if status == 202 else now


@dataclass(frozen=True, slots=True)
class Event:
    """A fault or a step of the scenario, written into the history when it happened."""

    t: float
    name: str
    fields: dict[str, Any]


@dataclass(slots=True)
class History:
    """Records and events of one scenario."""

    records: list[Record] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    def mark(self, name: str, **fields: Any) -> Event:
        """Note that `name` happens now (thread-safe: list appends are atomic)."""
        event = Event(SYSTEM_CLOCK.wall(), name, fields)
        self.events.append(event)
        return event

    def named(self, name: str) -> list[Event]:
        return [e for e in self.events if e.name == name]


@dataclass(frozen=True, slots=True)
class Load:
    """`rate` invocations per second of `capability` for `duration_s`, each a new request_id.

    `deadline_s` travels as `X-Reach-Deadline-Ms`. With `failover_s`, a request that
    got no answer, a 5xx or 409 `in_progress` is sent again with the same request_id
    (to the next coordinator when the last one did not answer) until `failover_s` has
    passed; the last answer counts. Requests answered 202 are polled for up to
    `settle_s` after the last arrival. `fields` are more invoke body fields
    (`timeout_class`, `mode`...).
    """

    coordinators: tuple[str, ...]
    capability: str
    rate: float
    duration_s: float
    deadline_s: float
    fields: dict[str, Any] = field(default_factory=dict)
    failover_s: float = 0.0
    settle_s: float = 0.0
    id_prefix: str = "req"

    @property
    def count(self) -> int:
        return max(1, round(self.rate * self.duration_s))


class LoadRun:
    """Runs one `Load` on a background thread; `join` returns the history."""

    def __init__(self, load: Load, history: History | None = None) -> None:
        self.load = load
        self.history = history if history is not None else History()
        self._thread = threading.Thread(target=self._run, name="load", daemon=True)
        self._failure: BaseException | None = None
        self._stopping = threading.Event()

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        """End the arrivals now, before `duration_s` (a run waiting for an event); the
        requests already sent still finish."""
        self._stopping.set()

    def join(self) -> History:
        """Wait for every request (and accepted task) to end; re-raise a crash of the run."""
        self._thread.join()
        if self._failure is not None:
            raise self._failure
        return self.history

    def _run(self) -> None:
        try:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                runner.run(self._main())
        except BaseException as exc:  # handed to join(), on the test's thread
            self._failure = exc

    async def _main(self) -> None:
        pool = HttpPool()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.TaskGroup() as group:
                start = loop.time()
                for index in range(self.load.count):
                    if self._stopping.is_set():
                        break
                    pause = start + index / self.load.rate - loop.time()
                    if pause > 0:
                        await asyncio.sleep(pause)  # the arrival schedule, not a wait for a state
                    group.create_task(self._invoke(pool, index))
            await self._settle(pool)
        finally:
            await pool.aclose()

    async def _invoke(self, pool: HttpPool, index: int) -> None:
        load = self.load
        record = Record(
            f"{load.id_prefix}-{index}",
            SYSTEM_CLOCK.wall(),
            deadline_s=max(load.deadline_s, load.failover_s),
        )
        self.history.records.append(record)
        body = orjson.dumps(
            {
                "capability": load.capability,
                "request_id": record.request_id,
                "payload": {"n": index},
                **load.fields,
            }
        )
        headers = (
            ("content-type", "application/json"),
            ("x-reach-deadline-ms", str(round(load.deadline_s * 1000))),
        )
        give_up = SYSTEM_CLOCK.monotonic() + record.deadline_s
        target = 0
        while True:
            record.tries += 1
            url = load.coordinators[target]
            left_s = give_up + GRACE_S - SYSTEM_CLOCK.monotonic()
            try:
                response = await pool.request(
                    "POST", f"{url}/v1/invoke", headers=headers, body=body, timeout_s=left_s
                )
            except PoolError:
                target = (target + 1) % len(load.coordinators)  # try the next coordinator
            else:
                answer = _decode(response)
                record.coordinator = url
                record.answer_t = SYSTEM_CLOCK.wall()
                record.take(response.status, answer, record.answer_t)
                if not (load.failover_s and _is_worth_resending(response, answer)):
                    return
            if not load.failover_s or SYSTEM_CLOCK.monotonic() >= give_up:
                return
            await asyncio.sleep(FAILOVER_PAUSE_S)

    async def _settle(self, pool: HttpPool) -> None:
        """Poll accepted tasks until they finish or `settle_s` runs out."""
        give_up = SYSTEM_CLOCK.monotonic() + self.load.settle_s
        slots = asyncio.Semaphore(TASK_POLLS_AT_ONCE)
        pending = [r for r in self.history.records if r.task_id and r.complete_t is None]
        while pending and SYSTEM_CLOCK.monotonic() < give_up:
            async with asyncio.TaskGroup() as group:
                for record in pending:
                    group.create_task(self._poll(pool, record, slots))
            pending = [r for r in pending if r.complete_t is None]
            if pending:
                await asyncio.sleep(TASK_POLL_S)  # the polling period, bounded by give_up

    async def _poll(self, pool: HttpPool, record: Record, slots: asyncio.Semaphore) -> None:
        async with slots:
            for url in (record.coordinator, *self.load.coordinators):
                try:
                    response = await pool.request(
                        "GET", f"{url}/v1/tasks/{record.task_id}", timeout_s=GRACE_S
                    )
                except PoolError:
                    continue  # that coordinator is gone: ask another
                task = _decode(response)
                if response.status == 200 and task.get("http_status") is not None:
                    record.take(task["http_status"], task["answer"], SYSTEM_CLOCK.wall())
                return


def _decode(response: Response) -> dict[str, Any]:
    """The JSON answer; a body that is not a JSON object (a bare 500) becomes an error."""
    try:
        answer = orjson.loads(response.body)
    except orjson.JSONDecodeError:
        answer = None
    if isinstance(answer, dict):
        return answer
    return {"error": {"code": f"{NOT_JSON}_{response.status}"}}


def _is_worth_resending(response: Response, answer: dict[str, Any]) -> bool:
    """Another try with the same request_id may end better: in progress elsewhere, or 5xx."""
    error = answer.get("error")
    in_progress = isinstance(error, dict) and error.get("code") == "in_progress"
    return response.status >= 500 or (response.status == 409 and in_progress)


@dataclass(frozen=True, slots=True)
class OfflineDispatch:
    """An attempt sent to an instance after the coordinator marked it offline."""

    request_id: str
    agent_id: str
    invoke_t: float
    offline_at: float


def offline_windows(marks: Iterable[HealthMark]) -> dict[str, list[tuple[float, float]]]:
    """Agent id -> the periods it was offline (from a mark to the next `healthy` mark)."""
    windows: dict[str, list[tuple[float, float]]] = {}
    since: dict[str, float] = {}
    for mark in sorted(marks, key=lambda m: m.t):
        if mark.state == "offline":
            since.setdefault(mark.agent_id, mark.t)
        elif mark.state == "healthy" and mark.agent_id in since:
            windows.setdefault(mark.agent_id, []).append((since.pop(mark.agent_id), mark.t))
    for agent_id, start in since.items():
        windows.setdefault(agent_id, []).append((start, math.inf))
    return windows


def dispatched_while_offline(
    records: Iterable[Record], marks: Iterable[HealthMark]
) -> list[OfflineDispatch]:
    """Attempts the coordinator certainly made while their instance was offline.

    An attempt happens between the request's sending and its final outcome (for a
    task, when it was seen finished). When both fall inside one offline period of the
    instance (from its offline mark to the next `healthy` mark; a coordinator logs a
    mark before it routes anything else), the attempt broke "offline gets no
    traffic". Requests overlapping a mark are not judged.
    """
    windows = offline_windows(marks)
    found = []
    for record in records:
        done_t = record.complete_t
        if done_t is None:
            continue
        for attempt in record.attempts:
            for start, end in windows.get(attempt.agent_id, ()):
                if start < record.invoke_t and done_t < end:
                    found.append(
                        OfflineDispatch(record.request_id, attempt.agent_id, record.invoke_t, start)
                    )
    return found


@dataclass(slots=True)
class Report:
    """The figures of one scenario; `write` saves them as JSON, `summary` is one line."""

    scenario: str
    config: dict[str, Any]
    duration_s: float
    offered_rps: float
    achieved_rps: float
    requests: int
    ok: int
    success_pct: float
    codes: dict[str, int]
    lost: int
    lost_ids: list[str]
    executions: int
    duplicate_executions: int
    duplicate_ids: list[str]
    duplicates: list[dict[str, Any]]  # the first duplicates as the caller and ledgers saw them
    dedup_hits: int
    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    late: int
    amplification: float
    retries_per_request: float
    agent_deliveries_per_request: float
    dispatched_while_offline: int
    offline_dispatches: list[dict[str, Any]]
    events: list[dict[str, Any]]
    figures: dict[str, Any] = field(default_factory=dict)

    def write(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.scenario}.json"
        path.write_bytes(orjson.dumps(asdict(self), option=orjson.OPT_INDENT_2))
        return path

    def summary(self) -> str:
        codes = ", ".join(f"{code} x{count}" for code, count in sorted(self.codes.items()))
        extra = "".join(f", {name}={value}" for name, value in self.figures.items())
        return (
            f"{self.scenario}: {self.requests} req @ {self.offered_rps:g}/s"
            f" ok={self.success_pct:.2f}% lost={self.lost} dup={self.duplicate_executions}"
            f" dedup_hits={self.dedup_hits} p50/p99/max={_ms(self.p50_ms)}/{_ms(self.p99_ms)}"
            f"/{_ms(self.max_ms)} ms amp={self.amplification:.3f}"
            f" offline_dispatch={self.dispatched_while_offline} codes[{codes}]{extra}"
        )


def check(
    scenario: str,
    load: Load,
    history: History,
    ledger: Iterable[LedgerRow],
    *,
    marks: Iterable[HealthMark] = (),
    config: dict[str, Any] | None = None,
    figures: dict[str, Any] | None = None,
) -> Report:
    """Join the history with the ledgers (and health marks) into the scenario's figures.

    `figures` are the scenario's own, reported along.
    """
    records = history.records
    ids = {r.request_id for r in records}
    rows = [row for row in ledger if row.request_id in ids]
    executed = Counter(row.request_id for row in rows if row.kind == "executed")
    lost = [r.request_id for r in records if _is_lost(r, executed)]
    duplicates = sorted(rid for rid, count in executed.items() if count > 1)
    latencies = sorted(r.latency_s * 1000 for r in records if r.latency_s is not None)
    requests = len(records)
    span_s = max(r.invoke_t for r in records) - min(r.invoke_t for r in records)
    ok = sum(r.is_success for r in records)
    attempts = sum(len(r.attempts) for r in records)
    offline = dispatched_while_offline(records, marks)
    return Report(
        scenario=scenario,
        config={"load": asdict(load), **(config or {})},
        duration_s=round(span_s, 3),
        offered_rps=load.rate,
        achieved_rps=round(requests / span_s, 1) if span_s else float(requests),
        requests=requests,
        ok=ok,
        success_pct=round(100 * ok / requests, 3),
        codes=dict(Counter(f"{r.status} {r.code}" for r in records)),
        lost=len(lost),
        lost_ids=lost[:20],
        executions=sum(executed.values()),
        duplicate_executions=len(duplicates),
        duplicate_ids=duplicates[:20],
        duplicates=_explain(duplicates[:20], records, rows),
        dedup_hits=sum(row.kind == "dedup_hit" for row in rows),
        p50_ms=_percentile(latencies, 0.50),
        p99_ms=_percentile(latencies, 0.99),
        max_ms=round(latencies[-1], 3) if latencies else None,
        late=sum(r.latency_s is not None and r.latency_s > r.deadline_s + LATE_S for r in records),
        amplification=round(attempts / requests, 4),
        retries_per_request=round(sum(max(0, len(r.attempts) - 1) for r in records) / requests, 4),
        agent_deliveries_per_request=round(len(rows) / requests, 4),
        dispatched_while_offline=len(offline),
        offline_dispatches=[asdict(o) for o in offline[:20]],
        events=[{"t": e.t, "name": e.name, **e.fields} for e in history.events],
        figures=figures or {},
    )


def _explain(
    request_ids: list[str], records: list[Record], rows: list[LedgerRow]
) -> list[dict[str, Any]]:
    """Each request executed more than once: its answer (attempts included) and every
    ledger row of it (which agent process ran it, when, under which trace)."""
    by_id = {r.request_id: r for r in records}
    return [
        {
            "record": asdict(by_id[request_id]),
            "ledger": [asdict(row) for row in rows if row.request_id == request_id],
        }
        for request_id in request_ids
    ]


def _is_lost(record: Record, executed: Counter[str]) -> bool:
    """No answer by deadline + 1 s (an accepted task that never finished
    included), or a success no agent's ledger shows."""
    latency_s = record.latency_s
    if latency_s is None or latency_s > record.deadline_s + GRACE_S:
        return True
    if record.complete_t is None:
        return True
    return record.is_success and executed[record.request_id] == 0


def _percentile(sorted_values: list[float], share: float) -> float | None:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(share * len(sorted_values)))
    return round(sorted_values[rank - 1], 3)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
