"""A2A push notifications: the configs a client sets on its tasks, and their delivery.

`PushConfigs` answers `CreateTaskPushNotificationConfig`, `Get...`, `List...` and
`Delete...` (v0.3 `tasks/pushNotificationConfig/set|get|list|delete`); configs live in the
`A2AStore`, beside the tasks, so any coordinator of a backend sees them. The webhook URL
passes the endpoint guard, as an agent's endpoint does.

`PushNotifier` runs on every coordinator: it looks at the watched tasks (those with a
config) every `LOOK_EVERY_S` and, for each state a task is seen in, POSTs the Task
(v1.0: `{"task": ...}`, a StreamResponse; v0.3: the Task) to each config's URL with
`X-A2A-Notification-Token` (and `Authorization` when the config gives credentials). Each
(config, state) is claimed once in the store before it is sent, so with several
coordinators watching, each update goes out at most once; a refused or failed POST is
retried with backoff (`RETRY_DELAYS_S`) by the claimer. A task that ended leaves the
watched set once its final state went out.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

import orjson
import structlog

from agent_reach.errors import ReachError
from agent_reach.faces import a2a_tasks as views
from agent_reach.faces.a2a_service import (
    INVALID_PARAMS,
    TASK_NOT_FOUND,
    A2AError,
    A2AFace,
    error_of,
    owner_of,
    principal_of,
)
from agent_reach.invoke import pool
from agent_reach.model.keys import Principal

if TYPE_CHECKING:
    from agent_reach.server.runtime import Runtime

log = structlog.get_logger("agent_reach.a2a_push")

LOOK_EVERY_S = 0.2  # how stale a pushed state may be; one store read per look when idle
RETRY_DELAYS_S = (0.2, 0.5, 1.0, 2.0, 4.0)  # after the first POST: ~8 s for a webhook to recover
POST_TIMEOUT_S = 5.0
MAX_CONFIGS = 10  # per task: a client needs one or two
CLAIM_TTL_S = 24 * 3600.0  # a claimed update is never sent again within a task's lifetime
TOKEN_HEADER = "X-A2A-Notification-Token"  # noqa: S105 (a header name)


class PushConfigs:
    """The push-config operations of the face (v1.0 forms in and out)."""

    def __init__(self, face: A2AFace) -> None:
        self.face = face
        self.store = face.runtime.backends.a2a

    async def create(self, params: dict[str, Any], principal: Principal) -> dict[str, Any]:
        """Set (or replace, by id) a config on the caller's task; the config comes back."""
        task_id = params.get("taskId")
        url = params.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise A2AError(INVALID_PARAMS, "url must be the webhook's http(s) URL")
        token = params.get("token")
        if token is not None and not isinstance(token, str):
            raise A2AError(INVALID_PARAMS, "token must be a string")
        authentication = params.get("authentication")
        if authentication is not None and not isinstance(authentication, dict):
            raise A2AError(INVALID_PARAMS, "authentication must be an object")
        await self.face.task(principal, str(task_id))  # -32001 when not the caller's task
        try:
            await self.face.runtime.security.guard.check_url(url, "url")
        except ReachError as exc:
            raise error_of(exc) from None
        config_id = str(params.get("id") or uuid.uuid4().hex)
        config = {"id": config_id, "taskId": task_id, "url": url}
        if token:
            config["token"] = token
        if authentication:
            config["authentication"] = authentication
        owner = owner_of(principal)
        try:
            configs = await self.store.list_push(owner, str(task_id))
            if len(configs) >= MAX_CONFIGS and config_id not in configs:
                raise A2AError(INVALID_PARAMS, f"a task takes at most {MAX_CONFIGS} push configs")
            document = orjson.dumps({**config, "version": params.get("_version", "1.0")})
            await self.store.put_push(
                owner, str(task_id), config_id, document, self.face.runtime.tasks.ttl_s
            )
        except ReachError as exc:
            raise error_of(exc) from None
        return config

    async def get(self, params: dict[str, Any], principal: Principal) -> dict[str, Any]:
        configs = await self._configs(params, principal)
        config_id = params.get("id")
        if not config_id and len(configs) == 1:  # v0.3 may leave the id out
            return next(iter(configs.values()))
        if config_id not in configs:
            raise A2AError(TASK_NOT_FOUND, f"no push config {config_id!r} on this task")
        return configs[str(config_id)]

    async def list(self, params: dict[str, Any], principal: Principal) -> dict[str, Any]:
        configs = await self._configs(params, principal)
        return {"configs": [configs[k] for k in sorted(configs)], "nextPageToken": ""}

    async def delete(self, params: dict[str, Any], principal: Principal) -> None:
        await self._configs(params, principal)
        try:
            deleted = await self.store.delete_push(
                owner_of(principal), str(params.get("taskId")), str(params.get("id"))
            )
        except ReachError as exc:
            raise error_of(exc) from None
        if not deleted:
            raise A2AError(TASK_NOT_FOUND, f"no push config {params.get('id')!r} on this task")

    async def _configs(
        self, params: dict[str, Any], principal: Principal
    ) -> dict[str, dict[str, Any]]:
        task_id = str(params.get("taskId"))
        await self.face.task(principal, task_id)
        try:
            raw = await self.store.list_push(owner_of(principal), task_id)
        except ReachError as exc:
            raise error_of(exc) from None
        out = {}
        for config_id, document in raw.items():
            config = orjson.loads(document)
            config.pop("version", None)
            out[config_id] = config
        return out


class PushNotifier:
    """Pushes watched tasks' updates to their webhooks (see the module doc)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.store = runtime.backends.a2a
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
        face = A2AFace(self.runtime)
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
        client = self.runtime.transports.get("a2a").client  # type: ignore[attr-defined]
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
