"""Replacement instances on demand: a scale event when a capability falls below its minimum.

`FleetWatcher` looks at the registry index every `interval_s` (it sees local changes and,
on a shared store, every other coordinator's). It publishes registrations, health
transitions and policy changes to the event feed, and, when a capability with a
`min_instances` (declared by its agents at registration or by the policy's
`min_instances` table; the larger counts) has fewer healthy instances than that and one
of them has just stopped being healthy, a scale event: the capability, the instances
left and the lost instance's last seen spec, so an orchestrator can start a copy of it.

Every coordinator sees the same loss; the webhook goes out once: the event id is derived
from the lost registration (agent id and registration time), and the first coordinator to
claim it in the shared idempotency store sends it. A claim whose sender dies is taken
over when its lease runs out, so a delivery is at least once, deduplicated by event id.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

import orjson
import structlog

from agent_reach.backends.protocols import IdempotencyStore
from agent_reach.clock import Clock
from agent_reach.errors import StoreUnavailable
from agent_reach.model.agents import HealthStatus
from agent_reach.observability.events import EventFeed
from agent_reach.policy.source import PolicySource
from agent_reach.registry.index import Instance, RegistryIndex
from agent_reach.registry.webhook import BACKOFF_S, TIMEOUT_S, ScaleWebhook

log = structlog.get_logger("agent_reach.registry")

DEFAULT_INTERVAL_S = 0.5  # a loss becomes a scale event within half a second of being seen
# A claimed event's lease: longer than all webhook tries together (their timeouts and pauses).
CLAIM_LEASE_S = (len(BACKOFF_S) + 1) * TIMEOUT_S + sum(BACKOFF_S) + 5.0
SENT_TTL_S = 3600.0  # a sent event is remembered this long, so a late coordinator skips it
DEDUP_PREFIX = "scale-event:"  # its claims live among the idempotency records


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    """A capability below its minimum, and the instance whose loss took it there."""

    event_id: str
    capability: str
    min_instances: int
    instances_left: int
    lost_agent_id: str
    lost_status: HealthStatus
    last_spec: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return {
            "event_id": self.event_id,
            "capability": self.capability,
            "min_instances": self.min_instances,
            "instances_left": self.instances_left,
            "lost": {"agent_id": self.lost_agent_id, "status": self.lost_status},
            "last_spec": self.last_spec,
        }


def _key(instance: Instance) -> tuple[str, float]:
    return instance.spec.id, instance.record.registered_at


class FleetWatcher:
    """Turns what the registry index shows into feed events and scale events."""

    def __init__(
        self,
        index: RegistryIndex,
        clock: Clock,
        feed: EventFeed,
        policy: PolicySource,
        claims: IdempotencyStore,
        webhook: ScaleWebhook | None = None,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
    ) -> None:
        self.index = index
        self.clock = clock
        self.feed = feed
        self.policy = policy
        self.claims = claims
        self.webhook = webhook
        self.interval_s = interval_s
        self._seen: dict[str, tuple[float, HealthStatus]] = {}  # id -> registered_at, status
        self._policy_version = policy.current.version
        self._sending: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        """Watch until cancelled; webhooks still being sent are cancelled with it."""
        try:
            while True:
                self.look()
                await asyncio.sleep(self.interval_s)
        finally:
            for task in self._sending:
                task.cancel()
            for task in list(self._sending):
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def look(self) -> list[ScaleEvent]:
        """One look: publish what changed since the last; return the scale events raised."""
        now = self.clock.monotonic()
        current = {i.spec.id: i for i in self.index.by_id.values()}
        lost: list[Instance] = []
        for agent_id, instance in current.items():
            registered_at, status = instance.record.registered_at, instance.status(now)
            before = self._seen.get(agent_id)
            if before is None or before[0] != registered_at:
                self.feed.publish("registration", _registration(instance, status))
            elif before[1] != status:
                self.feed.publish("health", {"agent_id": agent_id, "from": before[1], "to": status})
                if before[1] == "healthy":
                    lost.append(instance)
            self._seen[agent_id] = (registered_at, status)
        for agent_id in [a for a in self._seen if a not in current]:
            del self._seen[agent_id]
            self.feed.publish("deregistration", {"agent_id": agent_id})
        version = self.policy.current.version
        if version != self._policy_version:
            self.feed.publish("policy", {"from": self._policy_version, "version": version})
            self._policy_version = version
        events = [e for instance in lost for e in self._below_minimum(instance, now)]
        for event in events:
            self.feed.publish("scale", event.as_json())
            log.warning(
                "scale_event_raised",
                capability=event.capability,
                instances_left=event.instances_left,
                min_instances=event.min_instances,
                lost=event.lost_agent_id,
            )
            if self.webhook is not None:
                task = asyncio.create_task(self._deliver(event), name="scale-webhook")
                self._sending.add(task)
                task.add_done_callback(self._sending.discard)
        return events

    def _below_minimum(self, lost: Instance, now: float) -> list[ScaleEvent]:
        events = []
        for capability in lost.spec.capabilities:
            instances = self.index.by_capability.get(capability, [])
            declared = max((i.spec.min_instances for i in instances), default=0)
            minimum = max(declared, self.policy.current.min_instances.get(capability, 0))
            healthy = sum(i.status(now) == "healthy" for i in instances)
            if healthy < minimum:
                agent_id, registered_at = _key(lost)
                events.append(
                    ScaleEvent(
                        event_id=f"{capability}/{agent_id}/{registered_at!r}",
                        capability=capability,
                        min_instances=minimum,
                        instances_left=healthy,
                        lost_agent_id=agent_id,
                        lost_status=lost.status(now),
                        last_spec=lost.spec.model_dump(mode="json"),
                    )
                )
        return events

    async def _deliver(self, event: ScaleEvent) -> None:
        """Send the webhook unless another coordinator claimed (or sent) this event."""
        assert self.webhook is not None
        key = DEDUP_PREFIX + event.event_id
        body = orjson.dumps({"kind": "scale", "at": self.clock.wall(), **event.as_json()})
        try:
            claim = await self.claims.claim(key, "scale", CLAIM_LEASE_S)
        except StoreUnavailable:
            log.error("scale_webhook_unclaimed", event_id=event.event_id)
            return
        if claim.state != "claimed":
            log.info("scale_webhook_deduplicated", event_id=event.event_id, state=claim.state)
            return
        delivered = await self.webhook.send(event.event_id, body)
        with contextlib.suppress(StoreUnavailable):
            await self.claims.complete(
                key, claim.fence, 200 if delivered else 502, body, SENT_TTL_S
            )


def _registration(instance: Instance, status: HealthStatus) -> dict[str, Any]:
    spec = instance.spec
    return {
        "agent_id": spec.id,
        "capabilities": spec.capabilities,
        "status": status,
        "min_instances": spec.min_instances,
        "registered_at": instance.record.registered_at,
    }
