"""The A2A face's tasks and push configs in memory (`A2AStore`)."""

from __future__ import annotations

from agent_reach.backends.memory.expiring import ExpiringDict
from agent_reach.clock import Clock

MAX_LISTED = 1000  # tasks kept listable per owner: more is a client that never reads them
# The index may run this far over MAX_LISTED before it is trimmed (lists stop at
# MAX_LISTED): sorting 1,000 ids on every put cost a sending face ~0.1 ms per message.
TRIM_EVERY = 100


class MemoryA2AStore:
    """`A2AStore` in dicts with per-entry expiry."""

    def __init__(self, clock: Clock) -> None:
        self._now = clock.monotonic
        self._tasks: ExpiringDict[bytes] = ExpiringDict(clock.monotonic)
        self._order: dict[str, dict[str, float]] = {}  # owner -> task id -> created_at
        self._push: ExpiringDict[dict[str, bytes]] = ExpiringDict(clock.monotonic)
        self._watched: set[tuple[str, str]] = set()
        self._claims: ExpiringDict[bool] = ExpiringDict(clock.monotonic)

    async def put_task(
        self, owner: str, task_id: str, document: bytes, created_at: float, ttl_s: float
    ) -> None:
        self._tasks.set(f"{owner}\n{task_id}", document, ttl_s)
        order = self._order.setdefault(owner, {})
        order.setdefault(task_id, created_at)
        if len(order) > MAX_LISTED + TRIM_EVERY:  # one sort per TRIM_EVERY puts, not each
            for stale in sorted(order, key=order.__getitem__)[: len(order) - MAX_LISTED]:
                del order[stale]

    async def get_task(self, owner: str, task_id: str) -> bytes | None:
        return self._tasks.get(f"{owner}\n{task_id}")

    async def list_tasks(self, owner: str, limit: int) -> list[bytes]:
        order = self._order.get(owner, {})
        limit = min(limit, MAX_LISTED)
        out: list[bytes] = []
        for task_id in sorted(order, key=order.__getitem__, reverse=True):
            document = self._tasks.get(f"{owner}\n{task_id}")
            if document is None:
                del order[task_id]
                continue
            out.append(document)
            if len(out) >= limit:
                break
        return out

    async def put_push(
        self, owner: str, task_id: str, config_id: str, document: bytes, ttl_s: float
    ) -> None:
        key = f"{owner}\n{task_id}"
        configs = dict(self._push.get(key) or {})
        configs[config_id] = document
        self._push.set(key, configs, ttl_s)
        self._watched.add((owner, task_id))

    async def list_push(self, owner: str, task_id: str) -> dict[str, bytes]:
        return dict(self._push.get(f"{owner}\n{task_id}") or {})

    async def delete_push(self, owner: str, task_id: str, config_id: str) -> bool:
        configs = self._push.get(f"{owner}\n{task_id}")
        return configs is not None and configs.pop(config_id, None) is not None

    async def watched(self) -> list[tuple[str, str]]:
        return sorted(self._watched)

    async def unwatch(self, owner: str, task_id: str) -> None:
        self._watched.discard((owner, task_id))

    async def claim_update(self, key: str, ttl_s: float) -> bool:
        if self._claims.get(key) is not None:
            return False
        self._claims.set(key, True, ttl_s)
        return True
