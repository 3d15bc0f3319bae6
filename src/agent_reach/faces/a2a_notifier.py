"""A2A push notifications sent: `PushNotifier` runs on every coordinator.

It looks at the watched tasks (those with a config, `a2a_push`) every `LOOK_EVERY_S` and,
for each state a task is seen in, POSTs the Task (v1.0: `{"task": ...}`, a
StreamResponse; v0.3: the Task) to each config's URL with `X-A2A-Notification-Token`
(and `Authorization` when the config gives credentials). Each (config, state) is claimed
once in the store before it is sent, so with several coordinators watching, each update
goes out at most once; a refused or failed POST is retried with backoff
(`RETRY_DELAYS_S`) by the claimer. A task that ended leaves the watched set once its
final state went out.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any

import orjson
import structlog

from agent_reach.errors import ReachError
from agent_reach.faces import a2a_tasks as views
from agent_reach.faces.a2a_errors import A2AError
from agent_reach.faces.a2a_service import A2AFace
from agent_reach.faces.a2a_tasks import principal_of
from agent_reach.wire import pool

if TYPE_CHECKING:
    from agent_reach.faces.handler import FaceHandler

log = structlog.get_logger("agent_reach.a2a_push")

LOOK_EVERY_S = 0.2  # how stale a pushed state may be; one store read per look when idle
RETRY_DELAYS_S = (0.2, 0.5, 1.0, 2.0, 4.0)  # after the first POST: ~8 s for a webhook to recover
POST_TIMEOUT_S = 5.0
CLAIM_TTL_S = 24 * 3600.0  # a claimed update is never sent again within a task's lifetime
TOKEN_HEADER = "X-A2A-Notification-Token"  # noqa: S105 (a header name)


@asynccontextmanager
async def notifying(handler: FaceHandler) -> AsyncIterator[None]:
    """Push `handler`'s task updates while the block runs."""
    task = asyncio.create_task(PushNotifier(handler).run(), name="a2a-push")
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task


class PushNotifier:
    """Pushes watched tasks' updates to their webhooks (see the module doc)."""

    def __init__(self, handler: FaceHandler) -> None:
        self.handler = handler
        self.store = handler.a2a_store
        self._sending: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        """Look and push until cancelled."""
        try:
            while True:
                try:
                    await self.look()
                except ReachError:
                    pass  # the store is away: the next look tries again
                except Exception:  # a bad record must not end pushes for every task
                    log.exception("a2a_push_look_failed")
                await asyncio.sleep(LOOK_EVERY_S)
        finally:
            for sending in list(self._sending):
                sending.cancel()

    async def look(self) -> None:
        """One pass over the watched tasks: claim and send each state not yet sent."""
        face = A2AFace(self.handler)
        for owner, task_id in await self.store.watched():
            configs = await self.store.list_push(owner, task_id)
            try:
                task = await face.task(principal_of(owner), task_id)
            except A2AError:
                await self.store.unwatch(owner, task_id)  # expired or gone
                continue
            if not configs:
                await self.store.unwatch(owner, task_id)
                continue
            state = task["status"]["state"]
            for config_id, document in configs.items():
                claim = f"{owner}\n{task_id}\n{config_id}\n{state}"
                if await self.store.claim_update(claim, CLAIM_TTL_S):
                    self._start(orjson.loads(document), task)
            if state in views.TERMINAL:
                await self.store.unwatch(owner, task_id)

    def _start(self, config: dict[str, Any], task: dict[str, Any]) -> None:
        sending = asyncio.get_running_loop().create_task(self._send(config, task))
        self._sending.add(sending)
        sending.add_done_callback(self._sending.discard)

    async def _send(self, config: dict[str, Any], task: dict[str, Any]) -> None:
        view = views.with_history(task, 0)
        body = orjson.dumps(
            views.v03(view, "task") if config.get("version") == "0.3" else {"task": view}
        )
        headers = [("content-type", "application/json")]
        if config.get("token"):
            headers.append((TOKEN_HEADER, str(config["token"])))
        auth = config.get("authentication") or {}
        if auth.get("credentials"):
            headers.append(
                ("authorization", f"{auth.get('scheme') or 'Bearer'} {auth['credentials']}")
            )
        client = self.handler.push_client
        for delay_s in (0.0, *RETRY_DELAYS_S):
            await asyncio.sleep(delay_s)
            try:
                response = await client.request(
                    "POST", config["url"], headers=headers, body=body, timeout_s=POST_TIMEOUT_S
                )
            except (pool.PoolError, ValueError) as exc:
                log.info("a2a_push_failed", task_id=task["id"], error=str(exc))
                continue
            if 200 <= response.status < 300:
                return
            log.info("a2a_push_refused", task_id=task["id"], status=response.status)
        log.warning("a2a_push_given_up", task_id=task["id"], state=task["status"]["state"])
