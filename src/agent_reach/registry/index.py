"""The local, always-in-memory view of the registry that routing reads on every request.

It is fed by the registry service (from this coordinator's writes and from the store's
change events) and never touches a store itself.
"""

from __future__ import annotations

from agent_reach.backends.protocols import InstanceRecord
from agent_reach.model.agents import AgentSpec, HealthStatus
from agent_reach.model.quality import PRIOR, Outcomes
from agent_reach.registry.health import HealthTracker
from agent_reach.registry.stats import CallWindow


class Instance:
    """One registered instance as routing sees it: spec, lease deadline, health and stats."""

    __slots__ = (
        "_record",
        "disabled",
        "id",
        "last_error",
        "lease_until",
        "outcomes",
        "spec",
        "stats",
        "tracker",
    )

    def __init__(self, record: InstanceRecord, lease_until: float) -> None:
        self.id = record.spec.id  # fixed: a record with another id is another instance
        self._record = record
        self.spec: AgentSpec = record.spec  # an attribute: routing reads it on every request
        self.lease_until = lease_until
        self.tracker = HealthTracker()
        self.stats = CallWindow()
        self.last_error: str | None = None  # the latest failed probe or delivery, until a success
        self.disabled = False  # an admin's kill switch (mesh/kill_switch.py): out of routing
        self.outcomes: Outcomes = PRIOR  # its work over the window (mesh/quality.py)

    @property
    def health(self) -> HealthStatus:
        return self.tracker.state

    @health.setter
    def health(self, state: HealthStatus) -> None:
        self.tracker.adopt(state, 0.0)

    @property
    def record(self) -> InstanceRecord:
        return self._record

    @record.setter
    def record(self, record: InstanceRecord) -> None:
        self._record, self.spec = record, record.spec

    def is_live(self, now: float) -> bool:
        """Routable: the lease has not run out, health checks have not taken it offline
        and no admin has disabled it."""
        return self.lease_until > now and self.tracker.state != "offline" and not self.disabled

    def status(self, now: float) -> HealthStatus:
        """Health as listed: an instance whose lease ran out is offline whatever probes say."""
        return self.health if self.lease_until > now else "offline"


class RegistryIndex:
    """Instances by id and by capability; generic (catch-all) instances kept apart."""

    def __init__(self) -> None:
        self.by_id: dict[str, Instance] = {}
        self.by_capability: dict[str, list[Instance]] = {}
        self.generic: list[Instance] = []
        self.version = 0  # bumped when any spec changes (not on lease renewals)
        self.disabled: frozenset[str] = frozenset()  # ids an admin disabled, registered or not

    def upsert(self, record: InstanceRecord, lease_until: float) -> Instance:
        """Add or replace an instance's record; its health and stats survive a re-register."""
        instance = self.by_id.get(record.spec.id)
        if instance is None or instance.spec != record.spec:
            self.version += 1
        if instance is None:
            instance = Instance(record, lease_until)
            instance.disabled = instance.id in self.disabled
            self.by_id[instance.id] = instance
        else:
            self._unlink(instance)
            instance.record = record
            instance.lease_until = lease_until
        for tag in record.spec.capabilities:
            self.by_capability.setdefault(tag, []).append(instance)
        if record.spec.generic:
            self.generic.append(instance)
        return instance

    def disable(self, agent_ids: frozenset[str]) -> None:
        """Take exactly these ids out of routing (and put every other one back)."""
        self.disabled = agent_ids
        for instance in self.by_id.values():
            instance.disabled = instance.id in agent_ids

    def renew(self, agent_id: str, lease_until: float) -> None:
        """Move an instance's lease deadline; unknown ids are ignored (a load heals them)."""
        instance = self.by_id.get(agent_id)
        if instance is not None:
            instance.lease_until = lease_until

    def remove(self, agent_id: str) -> None:
        instance = self.by_id.pop(agent_id, None)
        if instance is not None:
            self._unlink(instance)
            self.version += 1

    def instances_of(self, capability: str) -> list[Instance]:
        """Every known instance of a capability, live or not."""
        return self.by_capability.get(capability, [])

    def _unlink(self, instance: Instance) -> None:
        for tag in instance.spec.capabilities:
            peers = self.by_capability.get(tag)
            if peers is not None:
                peers.remove(instance)
                if not peers:
                    del self.by_capability[tag]
        if instance in self.generic:
            self.generic.remove(instance)
