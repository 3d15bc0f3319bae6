"""Idempotency by request_id: claim before executing, replay or wait for duplicates.

Only ids the caller chose are claimed: an id the coordinator generates cannot be
repeated, so those requests skip the store entirely (the common, fast case).
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from typing import Any

import orjson
import structlog

from agent_reach.backends.protocols import Claim, IdempotencyStore
from agent_reach.clock import Clock
from agent_reach.errors import (
    AgentFailed,
    AgentUnreachable,
    InProgress,
    KeyReused,
    ReachError,
    StoreUnavailable,
)
from agent_reach.liveness import CoordinatorLiveness
from agent_reach.model.invocations import InvokeRequest
from agent_reach.wire.answer import Answer

log = structlog.get_logger("agent_reach.idempotency")

LEASE_GRACE_S = 5.0  # a claim outlives the request's deadline by this much before takeover
POLL_FIRST_S = 0.005  # a waiting duplicate looks again after 5 ms ...
POLL_MAX_S = 0.1  # ... backing off to 100 ms


def fingerprint(request: InvokeRequest) -> str:
    """What makes two requests "the same": everything that changes what gets executed."""
    material: dict[str, Any] = {
        "capability": request.capability,
        "text": request.text,
        "payload": request.payload,
        "context_id": request.context_id,
        "timeout_class": request.timeout_class,
    }
    return hashlib.sha256(orjson.dumps(material, option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass(slots=True)
class Owned:
    """A caller's request id this coordinator now executes, and where it has been sent.

    `sent_to` starts with the instances an earlier owner noted (it died, or gave the id
    back after an attempt of unknown outcome): `inherited`. Such a request may already
    have been acted on, so it is re-sent only to those instances, if they declared
    `idempotent` (their own guard sees the id again), else not at all.
    """

    guard: IdempotencyGuard
    key: str
    fence: int
    sent_to: list[str] = field(default_factory=list)
    inherited: tuple[str, ...] = ()

    async def note_sent(self, agent_id: str) -> None:
        """Record, before the delivery goes out, that `agent_id` is about to get it."""
        if agent_id in self.sent_to:
            return
        self.sent_to.append(agent_id)
        try:
            await self.guard.store.note_sent(self.key, self.fence, agent_id)
        except StoreUnavailable:
            log.error("idempotency_send_not_noted", request_id=self.key, agent_id=agent_id)


class IdempotencyGuard:
    """Decides, per caller-chosen request_id, whether this coordinator executes it."""

    def __init__(
        self, store: IdempotencyStore, clock: Clock, liveness: CoordinatorLiveness | None = None
    ) -> None:
        self.store = store
        self.clock = clock
        self.liveness = liveness

    async def claim(
        self, request: InvokeRequest, key: str, *, lease_s: float, deadline: float, wait: bool
    ) -> Owned | Answer:
        """The ownership when this call must execute the request, else the answer to give.

        A completed id replays its stored answer byte for byte; an id in progress is
        waited for until `deadline` (or refused with 409 `in_progress` when `wait` is
        False); an id whose owner died (its lease, or its coordinator's liveness, ran
        out) is taken over.
        """
        return await self.claim_key(
            key, fingerprint(request), lease_s=lease_s, deadline=deadline, wait=wait
        )

    async def claim_key(
        self, key: str, mark: str, *, lease_s: float, deadline: float, wait: bool
    ) -> Owned | Answer:
        """`claim` of any key, given the fingerprint `mark` of what it executes."""
        node = self.liveness.node_id if self.liveness is not None else ""
        pause = POLL_FIRST_S
        dead: str | None = None
        while True:
            claim = await self.store.claim(
                key, mark, lease_s + LEASE_GRACE_S, node=node, takeover_from=dead
            )
            if claim.state == "claimed":
                if dead is not None:
                    log.info("idempotency_taken_over", request_id=key, dead_node=dead)
                sent = tuple(claim.sent_to)
                return Owned(self, key, claim.fence, list(sent), sent)
            if claim.state == "mismatch":
                raise KeyReused("this request_id was used with a different request", request_id=key)
            if claim.state == "completed":
                return _replay(claim)
            if self.liveness is not None and self.liveness.is_dead(claim.node):
                dead = claim.node  # its coordinator stopped beating: taken over at once
                continue
            if not wait or self.clock.monotonic() + pause > deadline:
                raise InProgress("a request with this request_id is in progress", request_id=key)
            await asyncio.sleep(pause)
            pause = min(POLL_MAX_S, pause * 2)

    async def finish(
        self,
        key: str,
        fence: int,
        answer: Answer,
        *,
        keep: bool,
        ttl_s: float,
        forget: bool = False,
    ) -> None:
        """Store the answer for replays (`keep`), or give the id back (`forget`: no agent
        can have acted on it, so the instances it was sent to need not be remembered).

        A store outage here is logged, not raised: the caller still gets the answer the
        agent gave; a repeat of the id may then run again once the claim's lease ends.
        """
        try:
            if keep:
                await self.store.complete(key, fence, answer.status, answer.body, ttl_s)
            else:
                await self.store.release(key, fence, forget=forget)
        except StoreUnavailable:
            log.error("idempotency_record_lost", request_id=key, kept=keep)


NOT_TAKEN_STATUSES = frozenset({421, 429, 503})  # the agent answered that it did not take it


def may_have_acted(error: ReachError | None) -> bool:
    """Whether an agent may have acted on a request that ended with `error`: a timeout
    or a failure after it was sent (not one that never reached an agent, one it
    declined, nor a refusal before any delivery)."""
    if not isinstance(error, AgentFailed) or isinstance(error, AgentUnreachable):
        return False
    if (error.http_status or 0) in NOT_TAKEN_STATUSES:
        return False
    return error.outcome_unknown is not False  # unsaid: it may have


def _replay(claim: Claim) -> Answer:
    return Answer(claim.status, claim.body, replayed=True)


def is_final(error: ReachError | None) -> bool:
    """Answers to replay: successes, and failures an agent made final by acting on them.

    Everything else (no route, timeouts with unknown outcome, 5xx, store outages) gives
    the id back, so a retry by the caller can still execute it; when an earlier attempt
    may have acted, only on the instance it reached, if that one declared `idempotent`
    (its guard by request_id stops it from acting twice), else it ends `outcome_unknown`.
    """
    return error is None or (isinstance(error, AgentFailed) and not error.retryable)
