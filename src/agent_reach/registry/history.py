"""A short history per instance: health, lease and call window as they were a moment ago.

`agent-reach why` needs the state of an instance when a request was routed, not now.
A sampler reads the in-memory index every `SAMPLE_S` and appends a snapshot only when
something changed, keeping the last `HISTORY_LENGTH` per instance, so the history costs
nothing on the request path and stays bounded however long the coordinator runs.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from dataclasses import dataclass

from agent_reach.clock import Clock
from agent_reach.registry.index import Instance, RegistryIndex

SAMPLE_S = 0.5  # snapshots are at most this old: finer than any probe interval worth having
HISTORY_LENGTH = 32  # per instance: 16 s under steady traffic, far longer when idle
MAX_INSTANCES = 10_000  # histories kept, deregistered ones included; the oldest go first


@dataclass(frozen=True, slots=True)
class InstanceSnapshot:
    """One instance at wall time `time`; `lease_until` is wall time too."""

    time: float
    registered: bool
    health: str
    lease_until: float
    in_flight: int
    calls: int
    success_rate: float | None
    latency_ms_p50: float | None
    context_fields: tuple[str, ...]

    def same_state(self, other: InstanceSnapshot) -> bool:
        """Equal but for the sampling time."""
        return (
            self.registered,
            self.health,
            self.lease_until,
            self.in_flight,
            self.calls,
            self.success_rate,
            self.context_fields,
        ) == (
            other.registered,
            other.health,
            other.lease_until,
            other.in_flight,
            other.calls,
            other.success_rate,
            other.context_fields,
        )


class InstanceHistory:
    """Snapshots by instance id, newest last; read with `at`."""

    def __init__(self, index: RegistryIndex, clock: Clock) -> None:
        self.index = index
        self.clock = clock
        self._history: OrderedDict[str, deque[InstanceSnapshot]] = OrderedDict()

    def sample(self) -> None:
        """Append a snapshot of every instance whose state changed since its last one."""
        now, wall = self.clock.monotonic(), self.clock.wall()
        for agent_id, instance in self.index.by_id.items():
            self._append(agent_id, _snapshot(instance, now, wall))
        for agent_id, snapshots in self._history.items():
            last = snapshots[-1]
            if last.registered and agent_id not in self.index.by_id:
                snapshots.append(_gone(last, wall))

    def at(self, agent_id: str, wall_time: float) -> InstanceSnapshot | None:
        """The snapshot in force at `wall_time`: the last one taken before it, else the first.

        An instance this coordinator knows but has not sampled yet (it came less than a
        sampling interval ago) is sampled now: its first snapshot is its state then."""
        snapshots = self._history.get(agent_id)
        if not snapshots:
            instance = self.index.by_id.get(agent_id)
            if instance is None:
                return None
            snapshot = _snapshot(instance, self.clock.monotonic(), self.clock.wall())
            self._append(agent_id, snapshot)
            return snapshot
        found = snapshots[0]
        for snapshot in snapshots:
            if snapshot.time > wall_time:
                break
            found = snapshot
        return found

    async def run(self, interval_s: float = SAMPLE_S) -> None:
        """Sample every `interval_s` until cancelled."""
        while True:
            self.sample()
            await asyncio.sleep(interval_s)

    def _append(self, agent_id: str, snapshot: InstanceSnapshot) -> None:
        snapshots = self._history.get(agent_id)
        if snapshots is None:
            snapshots = self._history[agent_id] = deque(maxlen=HISTORY_LENGTH)
            if len(self._history) > MAX_INSTANCES:
                self._history.popitem(last=False)
        elif snapshots[-1].same_state(snapshot):
            return
        snapshots.append(snapshot)


def _snapshot(instance: Instance, now: float, wall: float) -> InstanceSnapshot:
    window = instance.stats
    return InstanceSnapshot(
        time=wall,
        registered=True,
        health=instance.status(now),
        lease_until=round(instance.lease_until + wall - now, 1),
        in_flight=window.in_flight,
        calls=window.calls,
        success_rate=window.success_rate,
        latency_ms_p50=window.latency_ms(0.5),
        context_fields=tuple(instance.spec.context_fields),
    )


def _gone(last: InstanceSnapshot, wall: float) -> InstanceSnapshot:
    return InstanceSnapshot(
        time=wall,
        registered=False,
        health="offline",
        lease_until=last.lease_until,
        in_flight=0,
        calls=last.calls,
        success_rate=last.success_rate,
        latency_ms_p50=last.latency_ms_p50,
        context_fields=last.context_fields,
    )
