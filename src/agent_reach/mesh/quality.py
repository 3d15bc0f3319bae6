"""The outcome ledger: how each instance's delegated work went over a sliding window.

Per instance: `completed`, `failed`, `timed_out`, `bounced` (it answered 421 "not mine"
to a request that named its capability, or handed the whole task straight back or
sideways — a delegation of a capability already in its chain), `declined` (offers it
declined), and the `good` / `bad` ratings of `POST /v1/feedback`. Any part of the
coordinator reports one with `QualityLedger.record(agent_id, kind)` — for instance the
negotiation, `record(agent_id, "declined")` — synchronously and for free: it counts in
this coordinator's view at once and is written to the shared `QualityStore` in the
next flush.

Counts live in time buckets of `window_s / BUCKETS` (`[quality] window_s`), so an
outcome is forgotten between `window_s - bucket` and `window_s` after it. Every
`REFRESH_S` the ledger flushes what it recorded and reads the window's totals back
(two pipelined round trips, off the request path): the view routing reads is what every
coordinator recorded, at most about a second old, and a store outage only delays it.

Ratings: a served request is remembered (batched in the same flush) for the window,
with its caller and the agents of its chain; its original caller, or an agent that
delegated it (a delegation token of the same chain whose holder is one of the
request's delegating agents), may rate it once.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import Counter
from collections.abc import Callable
from typing import Literal

import orjson
import structlog

from agent_reach.backends.protocols import QualityStore
from agent_reach.cancellation import honour_cancel
from agent_reach.clock import Clock
from agent_reach.errors import AlreadyRated, ReachError, UnknownRequest
from agent_reach.model.keys import Principal
from agent_reach.model.quality import PRIOR, OutcomeKind, Outcomes, QualityPolicy
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex
from agent_reach.security.ownership import may_use

log = structlog.get_logger("agent_reach.quality")

BUCKETS = 20  # a window is forgotten a twentieth at a time
REFRESH_S = 0.5  # another coordinator's outcomes count here within about this long
Rating = Literal["good", "bad"]


class QualityLedger:
    """Outcomes recorded here and read from the shared store; the view routing uses."""

    def __init__(
        self,
        store: QualityStore,
        index: RegistryIndex,
        policy: Callable[[], Policy],
        clock: Clock,
    ) -> None:
        self._store = store
        self._index = index
        self._policy = policy
        self._clock = clock
        self._pending: Counter[str] = Counter()  # "kind\tagent_id" -> n, not yet written
        self._served: list[tuple[str, bytes]] = []
        self._recent: dict[str, bytes] = {}  # served since the last flush: rated before it
        # agent id -> kind -> n (never 0): the window as last read, plus what was recorded since
        self._totals: dict[str, dict[str, int]] = {}
        self._task: asyncio.Task[None] | None = None

    @property
    def settings(self) -> QualityPolicy:
        return self._policy().quality

    def record(self, agent_id: str, kind: OutcomeKind) -> None:
        """Count one outcome of `agent_id` (here at once, everywhere after the next flush)."""
        self._pending[f"{kind}\t{agent_id}"] += 1
        counts = self._totals.get(agent_id)
        if counts is None:
            counts = self._totals[agent_id] = {}
        counts[kind] = counts.get(kind, 0) + 1
        instance = self._index.by_id.get(agent_id)
        if instance is not None:
            instance.outcomes = Outcomes.of(counts, self._policy().quality)

    def outcomes_of(self, agent_id: str) -> Outcomes:
        instance = self._index.by_id.get(agent_id)
        if instance is not None:
            return instance.outcomes
        return Outcomes.of(self._totals.get(agent_id, {}), self.settings)

    def served(self, request_id: str, agent_id: str, principal: Principal) -> None:
        """Remember who served `request_id` for whom, so that it can be rated."""
        chain = principal.chain
        record = orjson.dumps(
            {
                "agent_id": agent_id,
                "principal": principal.name,
                "root": chain.root if chain is not None else request_id,
                "delegated_by": [link.instance for link in chain.links] if chain else [],
            }
        )
        self._served.append((request_id, record))
        self._recent[request_id] = record

    async def rate(self, principal: Principal, request_id: str, rating: Rating) -> dict[str, str]:
        """Count `rating` for the instance that served `request_id`.

        404 `unknown_request` unless `principal` is its original caller (or an admin) or
        holds a delegation token of its chain whose holder delegated it; 409
        `already_rated` the second time.
        """
        record = self._recent.get(request_id) or await self._store.served(request_id)
        served = orjson.loads(record) if record is not None else None
        if served is None or not _may_rate(principal, served):
            raise UnknownRequest(
                "no request with this id that you may rate was served (unknown or too old)",
                request_id=request_id,
            )
        if not await self._store.claim_rating(request_id, self.settings.window_s):
            raise AlreadyRated("this request is already rated", request_id=request_id)
        agent_id = str(served["agent_id"])
        self.record(agent_id, rating)
        log.info("request_rated", request_id=request_id, agent_id=agent_id, rating=rating)
        return {"request_id": request_id, "agent_id": agent_id, "rating": rating}

    async def refresh(self) -> None:
        """Write what was recorded here, then read the window's totals back into the view."""
        settings = self.settings
        bucket_s = settings.window_s / BUCKETS
        series = f"w{round(settings.window_s * 1000)}"
        now = math.floor(self._clock.wall() / bucket_s)
        pending, self._pending = self._pending, Counter()
        served, self._served = self._served, []
        try:
            await self._store.add(series, now, pending, settings.window_s)
        except ReachError:
            self._pending.update(pending)  # counted at the next flush instead
            self._served[:0] = served
            raise
        try:
            await self._store.put_served(served, settings.window_s)
        except ReachError:
            self._served[:0] = served
            raise
        self._recent = {request_id: record for request_id, record in self._served}
        totals = Counter(await self._store.totals(series, range(now - BUCKETS + 1, now + 1)))
        totals.update(self._pending)  # recorded while the totals were read
        self._apply(totals, settings)

    def _apply(self, totals: Counter[str], settings: QualityPolicy) -> None:
        """The window's totals by agent, and every instance's outcomes from them (the
        prior for one with none)."""
        by_agent: dict[str, dict[str, int]] = {}
        for field, n in totals.items():
            kind, _, agent_id = field.partition("\t")
            if n:
                by_agent.setdefault(agent_id, {})[kind] = n
        self._totals = by_agent
        prior = PRIOR if settings == QualityPolicy() else Outcomes.of({}, settings)
        for agent_id, instance in self._index.by_id.items():
            counts = by_agent.get(agent_id)
            instance.outcomes = prior if counts is None else Outcomes.of(counts, settings)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._follow(), name="quality-ledger")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(ReachError):
            await self.refresh()  # what this coordinator recorded last is not lost

    async def _follow(self) -> None:
        while True:
            try:
                await self.refresh()
            except ReachError as exc:
                log.warning("quality_refresh_failed", error=exc.code)
            honour_cancel()
            await asyncio.sleep(REFRESH_S)


def _may_rate(principal: Principal, served: dict[str, object]) -> bool:
    """The original caller (on its own key), or an agent of the chain that delegated it."""
    chain = principal.chain
    if chain is None:
        return may_use(principal, str(served["principal"]))
    delegated_by = served.get("delegated_by")
    return (
        served.get("root") == chain.root
        and isinstance(delegated_by, list)
        and chain.holder.instance in delegated_by
    )
