"""A2A messages both ways, in the v1.0 and v0.3 JSON-RPC wire forms.

v1.0 parts are `{"text"}` / `{"data"}`, roles `ROLE_USER`, states `TASK_STATE_*`, a
send answers `{"message"}` or `{"task"}`; v0.3 parts carry `kind`, roles are `user`,
states lower-case, and a send answers the Message or Task itself (with `kind`).
"""

from __future__ import annotations

from typing import Any

from agent_reach.adapters.a2a_cards import A2AVersion

SEND = {"1.0": "SendMessage", "0.3": "message/send"}
GET_TASK = {"1.0": "GetTask", "0.3": "tasks/get"}
STREAM = {"1.0": "SendStreamingMessage", "0.3": "message/stream"}
COMPLETED = frozenset({"TASK_STATE_COMPLETED", "completed"})
FAILED = frozenset(
    {
        "TASK_STATE_FAILED",
        "TASK_STATE_CANCELED",
        "TASK_STATE_REJECTED",
        "failed",
        "canceled",
        "rejected",
    }
)
STUCK = frozenset(  # the agent waits for something a routed request cannot give it
    {"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED", "input-required", "auth-required"}
)


def message(
    version: A2AVersion,
    message_id: str,
    text: str | None,
    data: Any,
    metadata: dict[str, Any],
    *,
    role: str = "user",
) -> dict[str, Any]:
    """A message carrying the text and the data (the payload) as parts."""
    parts: list[dict[str, Any]] = []
    if text:
        parts.append({"text": text})
    if data is not None or not parts:  # a message needs a part: an empty payload then
        parts.append(
            {"data": data if isinstance(data, dict) else ({} if data is None else {"value": data})}
        )
    if version == "0.3":
        for part in parts:
            part["kind"] = "text" if "text" in part else "data"
        return {
            "kind": "message",
            "messageId": message_id,
            "role": role,
            "parts": parts,
            "metadata": metadata,
        }
    return {
        "messageId": message_id,
        "role": "ROLE_USER" if role == "user" else "ROLE_AGENT",
        "parts": parts,
        "metadata": metadata,
    }


def parts_of(parts: Any) -> dict[str, Any]:
    """`{"text", "data"}` of a part list (texts joined; one data part itself, more a list)."""
    texts: list[str] = []
    datas: list[Any] = []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif "data" in part:
            datas.append(part["data"])
    data = datas[0] if len(datas) == 1 else (datas or None)
    return {"text": "\n".join(texts) if texts else None, "data": data}


def split_answer(result: Any) -> tuple[str, dict[str, Any]]:
    """("message" | "task", the object) of a send's result in either version."""
    if isinstance(result, dict):
        if isinstance(result.get("message"), dict):
            return "message", result["message"]
        if isinstance(result.get("task"), dict):
            return "task", result["task"]
        if result.get("kind") in ("message", "task"):
            return str(result["kind"]), result
    return "unknown", {}


def task_state(task: dict[str, Any]) -> str:
    status = task.get("status")
    return str(status.get("state", "")) if isinstance(status, dict) else ""


def task_result(task: dict[str, Any]) -> dict[str, Any]:
    """A finished task's artifacts (else its status message) as `{"text", "data", "task_id"}`."""
    parts: list[Any] = []
    for artifact in task.get("artifacts") or []:
        if isinstance(artifact, dict):
            parts += artifact.get("parts") or []
    if not parts:
        status = task.get("status") or {}
        parts = (status.get("message") or {}).get("parts") or []
    return {**parts_of(parts), "task_id": task.get("id")}
