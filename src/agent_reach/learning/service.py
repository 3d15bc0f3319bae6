"""Learned examples: written through the store, read as one snapshot per coordinator.

Every coordinator polls the store's version every SYNC_S and rebuilds its snapshot when it
changed (or every REBUILD_S, so expired examples go), so a correction made through one
coordinator is used by every other within about a second, and at once by its own.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable

import orjson
import structlog
from pydantic import ValidationError

from agent_reach.backends.protocols import LearningStore
from agent_reach.clock import Clock
from agent_reach.errors import NotFound, ReachError, UnknownRequest, ValidationFailed
from agent_reach.model.feedback import LearnedExample, RoutedText
from agent_reach.model.keys import Principal
from agent_reach.observability.metrics import Metrics
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.learned import LearnedSet
from agent_reach.routing.matchers.protocol import normalize_text
from agent_reach.security.ownership import may_use

log = structlog.get_logger("agent_reach.learning")

SYNC_S = 1.0  # another coordinator's correction is in force here within about this long
REBUILD_S = 60.0  # the snapshot is rebuilt at least this often, so expired examples leave it


class LearningService:
    """Routed texts, corrections and negatives in the store; the snapshot in force."""

    def __init__(
        self,
        store: LearningStore,
        index: RegistryIndex,
        policy: Callable[[], Policy],
        clock: Clock,
        metrics: Metrics,
    ) -> None:
        self.store = store
        self.index = index
        self.policy = policy
        self.clock = clock
        self.metrics = metrics
        self.learned = LearnedSet()
        self._synced_at = -REBUILD_S

    def snapshot(self) -> LearnedSet:
        return self.learned

    async def record_text(
        self, request_id: str, principal: str, text: str, capability: str | None
    ) -> None:
        """Remember a routed text so that its caller can correct it; a store outage costs
        only the chance to correct it (the route stands)."""
        document = RoutedText(
            request_id=request_id, principal=principal, text=text, capability=capability
        )
        try:
            await self.store.put_text(
                request_id,
                document.model_dump_json().encode(),
                self.policy().learning.correctable_s,
            )
        except ReachError as exc:
            log.warning("routed_text_not_kept", request_id=request_id, error=exc.code)

    async def correct(
        self, principal: Principal, request_id: str, capability: str
    ) -> LearnedExample:
        """Learn that the text of `request_id` belongs to `capability`.

        `UnknownRequest` (404) unless `principal` routed that text request (or is an
        admin) within the policy's `learning.correctable_s`; `ValidationFailed` (422) for
        a capability no registered agent offers.
        """
        raw = await self.store.get_text(request_id)
        routed = _routed(raw)
        if routed is None or not may_use(principal, routed.principal):
            raise UnknownRequest(
                "no text request with this id of yours can be corrected (unknown or too old)",
                request_id=request_id,
            )
        if capability not in self.index.by_capability or all(
            i.spec.generic for i in self.index.instances_of(capability)
        ):
            raise ValidationFailed(f"no registered agent offers {capability!r}", field="capability")
        example = await self._learn(routed, capability, "positive", "feedback")
        self.metrics.routing_feedback.labels("positive").inc()
        return example

    async def misdirected(
        self, request_id: str, principal: str, text: str, capability: str
    ) -> None:
        """An agent of `capability` answered 421 to `text`: remember it as a negative."""
        routed = RoutedText(request_id=request_id, principal=principal, text=text, capability=None)
        try:
            await self._learn(routed, capability, "negative", "misdirected")
        except ReachError as exc:
            log.warning("negative_not_kept", request_id=request_id, error=exc.code)
            return
        self.metrics.routing_feedback.labels("negative").inc()

    async def examples(self, capability: str | None = None) -> list[LearnedExample]:
        """The learned examples in the store, newest first (optionally of one capability)."""
        found = [e for e in (_example(d) for d in await self.store.examples()) if e is not None]
        now = self.clock.wall()
        live = [e for e in found if e.expires_at > now and capability in (None, e.capability)]
        return sorted(live, key=lambda e: e.learned_at, reverse=True)

    async def forget(self, example_id: str) -> None:
        """Delete one learned example everywhere; `NotFound` when there is none."""
        if not await self.store.delete_example(example_id):
            raise NotFound("no learned example has this id", example_id=example_id)
        await self.sync(force=True)

    async def sync(self, *, force: bool = False) -> None:
        """Rebuild the snapshot when the store's examples changed (or it is due anyway)."""
        version = await self.store.version()
        now = self.clock.monotonic()
        due = now - self._synced_at >= REBUILD_S
        if not force and not due and version == self.learned.version:
            return
        examples = await self.examples()
        self.learned = LearnedSet.of(examples, version, self.clock.wall())
        self._synced_at = now

    async def run(self) -> None:
        """Keep the snapshot current until cancelled; a store outage is retried next time."""
        while True:
            try:
                await self.sync()
            except ReachError as exc:
                log.warning("learned_sync_failed", error=exc.code)
            await asyncio.sleep(SYNC_S)

    async def _learn(
        self, routed: RoutedText, capability: str, kind: str, source: str
    ) -> LearnedExample:
        policy = self.policy().learning
        now = self.clock.wall()
        text = normalize_text(routed.text)
        digest = hashlib.sha256(f"{kind}\n{capability}\n{text}".encode()).hexdigest()[:16]
        example = LearnedExample.model_validate(
            {
                "id": digest,
                "capability": capability,
                "text": routed.text,
                "kind": kind,
                "source": source,
                "request_id": routed.request_id,
                "principal": routed.principal,
                "learned_at": now,
                "expires_at": now + policy.example_ttl_s,
            }
        )
        await self.store.add_example(
            example.id,
            capability,
            example.model_dump_json().encode(),
            ttl_s=policy.example_ttl_s,
            keep=policy.max_per_capability,
        )
        log.info("example_learned", kind=kind, capability=capability, request_id=routed.request_id)
        await self.sync(force=True)
        return example


def _routed(document: bytes | None) -> RoutedText | None:
    if document is None:
        return None
    try:
        return RoutedText.model_validate_json(document)
    except ValidationError:
        return None


def _example(document: bytes) -> LearnedExample | None:
    try:
        return LearnedExample.model_validate(orjson.loads(document))
    except (ValidationError, orjson.JSONDecodeError):
        return None
