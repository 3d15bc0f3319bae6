"""A2A push-notification configs: what a client sets on its tasks.

`PushConfigs` answers `CreateTaskPushNotificationConfig`, `Get...`, `List...` and
`Delete...` (v0.3 `tasks/pushNotificationConfig/set|get|list|delete`); configs live in the
`A2AStore`, beside the tasks, so any coordinator of a backend sees them. The webhook URL
passes the endpoint guard, as an agent's endpoint does. `a2a_notifier` sends them.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from agent_reach.errors import ReachError
from agent_reach.faces.a2a_errors import INVALID_PARAMS, TASK_NOT_FOUND, A2AError, error_of
from agent_reach.faces.a2a_tasks import owner_of
from agent_reach.model.keys import Principal

if TYPE_CHECKING:
    from agent_reach.faces.handler import FaceHandler


MAX_CONFIGS = 10  # per task: a client needs one or two


class TaskReader(Protocol):
    """What the configs need of the face: its handler, and the caller's task (-32001)."""

    handler: FaceHandler

    async def task(self, principal: Principal, task_id: Any) -> dict[str, Any]: ...


class PushConfigs:
    """The push-config operations of the face (v1.0 forms in and out)."""

    def __init__(self, face: TaskReader) -> None:
        self.face = face
        self.store = face.handler.a2a_store

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
            await self.face.handler.check_url(url, "url")
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
                owner, str(task_id), config_id, document, self.face.handler.task_ttl_s
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
