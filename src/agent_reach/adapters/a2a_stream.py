"""A2A message streams (`SendStreamingMessage`, v0.3 `message/stream`) read as events.

Each server-sent event of an A2A stream is a JSON-RPC response (on the HTTP+JSON binding:
the bare StreamResponse) whose result is a Task, a Message, a status update or an
artifact update (v1.0 `{"task"}`, `{"message"}`,
`{"statusUpdate"}`, `{"artifactUpdate"}`; v0.3 the object with `kind`). `A2AEvents`
makes each one the event a streaming caller receives: a message's or an artifact
chunk's text (its data as JSON when it has no text) as `message` / `artifact`, a status
message as `status`; updates without content are skipped; a failed, canceled or
rejected task, one that asks for input, and a JSON-RPC error end the stream with the
errors a whole send would raise (`a2a_task_failed`, `a2a_error`).
"""

from __future__ import annotations

from typing import Any

import orjson

from agent_reach.adapters import a2a_messages as msgs
from agent_reach.errors import AgentFailed

_KINDS = {  # v1.0 key or v0.3 kind -> our event name
    "message": "message",
    "task": "task",
    "statusUpdate": "status",
    "status-update": "status",
    "artifactUpdate": "artifact",
    "artifact-update": "artifact",
}


class A2AEvents:
    """The events of one A2A stream, one at a time (stateful: a last Task snapshot is
    forwarded only when nothing came before it)."""

    def __init__(self, *, rest: bool = False) -> None:
        self.forwarded = False
        self.rest = rest  # HTTP+JSON: each event is the result itself

    def translate(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """Our event for one A2A event; None when it carries nothing to forward."""
        try:
            answer = orjson.loads(event["data"])
        except orjson.JSONDecodeError:
            raise _final("an event of the A2A stream is not JSON", "agent_bad_answer") from None
        kind, body = _split(as_rpc(answer) if self.rest else answer)
        if kind == "task":
            _check_state(body)
            if self.forwarded or msgs.task_state(body) not in msgs.COMPLETED:
                return None
            result = msgs.task_result(body)
        elif kind == "status":
            _check_state(body)
            result = msgs.parts_of(((body.get("status") or {}).get("message") or {}).get("parts"))
        elif kind in ("message", "artifact"):
            holder = body if kind == "message" else body.get("artifact") or {}
            result = msgs.parts_of(holder.get("parts"))
        else:
            return None
        data = _content(result)
        if data is None:
            return None
        self.forwarded = True
        return {"event": "message" if kind == "task" else kind, "data": data}


def whole_answer(answer: Any) -> dict[str, Any]:
    """A JSON-RPC answer that came whole instead of as a stream: its result, or its error."""
    kind, body = _split(answer)
    if kind == "message":
        return msgs.parts_of(body.get("parts"))
    if kind == "task":
        _check_state(body)
        return msgs.task_result(body)
    raise _final("the A2A agent's answer is neither a Message nor a Task", "agent_bad_answer")


def as_rpc(answer: Any) -> Any:
    """An HTTP+JSON answer (a result, or a `google.rpc.Status` error) in the JSON-RPC form."""
    if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
        return {"error": answer["error"]}
    return {"result": answer}


def refusal(error: dict[str, Any], **details: Any) -> AgentFailed:
    """A JSON-RPC error answer of an A2A agent: never retried, the agent decided."""
    return AgentFailed(
        f"the A2A agent refused: {error.get('message', '')}",
        code="a2a_error",
        retryable=False,
        rpc_code=error.get("code"),
        rpc_message=error.get("message"),
        **details,
    )


def _split(answer: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
        raise refusal(answer["error"], outcome_unknown=True)
    result = answer.get("result") if isinstance(answer, dict) else None
    if not isinstance(result, dict):
        return "unknown", {}
    for key, value in result.items():
        if key in _KINDS and isinstance(value, dict):
            return _KINDS[key], value
    return _KINDS.get(str(result.get("kind")), "unknown"), result


def _check_state(body: dict[str, Any]) -> None:
    state = msgs.task_state(body)
    if state in msgs.FAILED or state in msgs.STUCK:
        failure = _final(f"the A2A task ended {state}", "a2a_task_failed")
        failure.details["task_state"] = state
        raise failure


def _content(result: dict[str, Any]) -> str | None:
    if result.get("text"):
        return str(result["text"])
    if result.get("data") is not None:
        return orjson.dumps(result["data"]).decode()
    return None


def _final(message: str, code: str) -> AgentFailed:
    return AgentFailed(message, code=code, retryable=False, outcome_unknown=True)  # it acted
