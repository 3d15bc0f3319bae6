"""A2A Tasks as the face shows them: built in the v1.0 wire form, turned into v0.3 on the
way out, trimmed to a history length, filtered and paged for `ListTasks`.

A face task is a record in the `A2AStore` (`{"id", "contextId", "kind", "createdAt",
"history", "status", "artifacts"?}`): `kind` says where its live state is — `board` (an
asynchronous invocation: `GET /v1/tasks`' document), `stream` (a streamed reply: its
request's idempotency record) — or that the record is the whole task (`rejected`).
"""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import UTC, datetime
from typing import Any

import orjson

from agent_reach.model.keys import ANONYMOUS, Principal, owned_key

# our task status -> A2A v1.0 state
STATES = {
    "queued": "TASK_STATE_SUBMITTED",
    "running": "TASK_STATE_WORKING",
    "suspended": "TASK_STATE_WORKING",
    "ok": "TASK_STATE_COMPLETED",
    "fallback": "TASK_STATE_COMPLETED",
    "degraded": "TASK_STATE_COMPLETED",
    "error": "TASK_STATE_FAILED",
}
TERMINAL = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
)
KNOWN_STATES = TERMINAL | {
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_AUTH_REQUIRED",
}
DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 50, 100  # the A2A spec's ListTasks bounds
_V03_ROLES = {"ROLE_USER": "user", "ROLE_AGENT": "agent"}


def timestamp(wall_s: float) -> str:
    """An ISO 8601 UTC timestamp, as A2A status timestamps are written."""
    return datetime.fromtimestamp(wall_s, UTC).isoformat().replace("+00:00", "Z")


def parts(result: Any) -> list[dict[str, Any]]:
    """An invoke result as parts: its text (when it has one) and the data itself."""
    out: list[dict[str, Any]] = []
    if isinstance(result, str):
        out.append({"text": result})
    elif isinstance(result, dict) and isinstance(result.get("text"), str):
        out.append({"text": result["text"]})
    if result is not None and not isinstance(result, str):
        out.append({"data": result if isinstance(result, dict) else {"value": result}})
    return out


def agent_message(
    parts_: list[dict[str, Any]], context_id: str | None, **extra: Any
) -> dict[str, Any]:
    message: dict[str, Any] = {"messageId": uuid.uuid4().hex, "role": "ROLE_AGENT", "parts": parts_}
    if context_id:
        message["contextId"] = context_id
    message.update(extra)
    return message


def board_view(document: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """(status, artifacts) of a `GET /v1/tasks` document or a replayed invoke record."""
    status = str(document.get("status", "queued"))
    answer = document.get("answer")
    if document.get("http_status") is not None and isinstance(answer, dict):
        status = str(answer.get("status") or ("error" if "error" in answer else "ok"))
    view: dict[str, Any] = {"state": STATES.get(status, "TASK_STATE_WORKING")}
    if isinstance(document.get("updated_at"), int | float):
        view["timestamp"] = timestamp(document["updated_at"])
    task_id = str(document.get("task_id") or document.get("request_id"))
    if isinstance(answer, dict) and "result" in answer:
        return view, [{"artifactId": f"{task_id}-result", "parts": parts(answer["result"])}]
    if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
        error = answer["error"]
        view["message"] = agent_message(
            [{"text": str(error.get("message", ""))}, {"data": error}], None
        )
    return view, None


def with_history(task: dict[str, Any], history_length: int | None) -> dict[str, Any]:
    """The task with its `history_length` most recent messages (all when None, none at 0)."""
    history = task.get("history") or []
    out = {k: v for k, v in task.items() if k not in ("history", "kind", "createdAt")}
    if history_length is None:
        out["history"] = history
    elif history_length > 0:
        out["history"] = history[-history_length:]
    return out


def page(
    tasks: list[dict[str, Any]], params: dict[str, Any]
) -> tuple[list[dict[str, Any]], str, int]:
    """(this page, next page token or "", total matching) of `tasks`, most recently
    updated first, filtered by `contextId`, `status` and `statusTimestampAfter`;
    `ValueError` for a parameter out of range or a token this face did not write. A token
    is the last task's place, so it holds when that task changes or goes (a task updated
    during the listing may move above it, as in the a2a-sdk's own store)."""
    size = params.get("pageSize")  # a given 0 is out of range, as the SDK's handler says
    size = DEFAULT_PAGE_SIZE if size is None else size
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_PAGE_SIZE:
        raise ValueError(f"pageSize must be 1 to {MAX_PAGE_SIZE}")
    context, state = params.get("contextId"), _state_filter(params.get("status"))
    after = _instant(params["statusTimestampAfter"]) if params.get("statusTimestampAfter") else None
    matching = [
        t
        for t in tasks
        if (not context or t.get("contextId") == context)
        and (not state or t["status"]["state"] == state)
        and (after is None or _instant(t["status"].get("timestamp")) > after)
    ]
    matching.sort(key=_cursor, reverse=True)
    start = 0
    if params.get("pageToken"):  # resume after the last task given, even if it is gone
        cursor = _cursor_of(str(params["pageToken"]))
        start = next((i for i, t in enumerate(matching) if _cursor(t) < cursor), len(matching))
    chunk = matching[start : start + size]
    more = start + size < len(matching)
    token = _token(chunk[-1]) if more and chunk else ""
    return chunk, token, len(matching)


def _instant(value: Any) -> float:
    """An ISO 8601 timestamp as epoch seconds (0 when there is none); `ValueError` if odd."""
    if not value:
        return 0.0
    moment = datetime.fromisoformat(str(value))
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _state_filter(value: Any) -> str | None:
    """The v1.0 state a list is filtered by: none for an unset enum (`UNSPECIFIED`, and the
    `UNRECOGNIZED` the JavaScript SDK sends for it), a v0.3 name (`input-required`) mapped."""
    if value in (None, "", "TASK_STATE_UNSPECIFIED", "UNRECOGNIZED"):
        return None
    state = str(value)
    if not state.startswith("TASK_STATE_"):
        state = "TASK_STATE_" + state.upper().replace("-", "_")
    if state not in KNOWN_STATES:
        raise ValueError(f"status {value!r} is not a task state")
    return state


def _cursor(task: dict[str, Any]) -> tuple[float, str]:
    """Where a task sorts: by its status timestamp (the spec's ListTasks order, most
    recently updated first; its creation when it has none), then by id."""
    stamp = task["status"].get("timestamp")
    return (_instant(stamp) if stamp else float(task.get("createdAt", 0.0))), str(task["id"])


def _token(task: dict[str, Any]) -> str:
    created, task_id = _cursor(task)
    return base64.urlsafe_b64encode(orjson.dumps([created, task_id])).decode().rstrip("=")


def _cursor_of(token: str) -> tuple[float, str]:
    try:
        created, task_id = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        return float(created), str(task_id)
    except (binascii.Error, orjson.JSONDecodeError, TypeError, ValueError):
        raise ValueError("pageToken is not a token this server gave") from None


def v03(value: dict[str, Any], kind: str) -> dict[str, Any]:
    """A v1.0 Task, Message or update event in the v0.3 form (`kind`s, lower-case states
    and roles)."""
    out = dict(value)
    if kind == "message":
        out["role"] = _V03_ROLES.get(str(value.get("role")), "agent")
        out["parts"] = [_part_v03(p) for p in value.get("parts") or []]
    else:
        if isinstance(value.get("status"), dict):
            out["status"] = _status_v03(value["status"])
        if "artifacts" in value:
            out["artifacts"] = [_artifact_v03(a) for a in value["artifacts"]]
        if "artifact" in value:
            out["artifact"] = _artifact_v03(value["artifact"])
        if "history" in value:
            out["history"] = [v03(m, "message") for m in value["history"]]
    out["kind"] = kind
    return out


def _status_v03(status: dict[str, Any]) -> dict[str, Any]:
    out = dict(status)
    out["state"] = (
        str(status.get("state", "")).removeprefix("TASK_STATE_").lower().replace("_", "-")
    )
    if isinstance(status.get("message"), dict):
        out["message"] = v03(status["message"], "message")
    return out


def _artifact_v03(artifact: dict[str, Any]) -> dict[str, Any]:
    return {**artifact, "parts": [_part_v03(p) for p in artifact.get("parts") or []]}


def _part_v03(part: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "text" if "text" in part else "data", **part}


def owner_of(principal: Principal) -> str:
    """Whose tasks these are in the `A2AStore`: `""` for the anonymous caller (keys off)."""
    return owned_key(principal, "")


def principal_of(owner: str) -> Principal:
    """A principal whose records `owner_of` names `owner` (the push notifier reads as it)."""
    if not owner:
        return ANONYMOUS
    return Principal("a2a-push", owner.removesuffix("/"), None, "caller")
