"""The A2A face's errors: JSON-RPC 2.0 and A2A codes, `A2AError`, and an Agent-Reach
error as the closest of them. Both bindings answer with these (REST maps them to HTTP)."""

from __future__ import annotations

from typing import Any

from agent_reach.errors import ReachError, UnknownTask

# JSON-RPC 2.0 and A2A error codes (A2A spec, "Error Handling")
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL = (
    -32700,
    -32600,
    -32601,
    -32602,
    -32603,
)
TASK_NOT_FOUND, NOT_CANCELABLE, PUSH_NOT_SUPPORTED, UNSUPPORTED = -32001, -32002, -32003, -32004
NO_EXTENDED_CARD, VERSION_NOT_SUPPORTED = -32007, -32009


class A2AError(Exception):
    """An A2A error answer: a JSON-RPC code (the REST binding maps it to HTTP); `http_status`
    401 without a valid key, else the binding's own."""

    def __init__(
        self,
        code: int,
        message: str,
        data: dict[str, Any] | None = None,
        http_status: int | None = None,
        *,
        call_id: Any = None,
    ) -> None:
        super().__init__(message)
        self.code, self.message, self.data, self.http_status = code, message, data, http_status
        self.call_id = call_id  # the JSON-RPC request's id, when the error knows it


def error_of(exc: ReachError) -> A2AError:
    """An Agent-Reach error as the closest JSON-RPC/A2A error, its own code in `data`."""
    data = {"code": exc.code, **{k: v for k, v in exc.details.items() if k != "route"}}
    if exc.status == 401:
        return A2AError(INVALID_REQUEST, exc.message, data, 401)
    if exc.status == 403:  # authenticated, not allowed: a typed error the client can read
        return A2AError(INVALID_REQUEST, exc.message, data)
    if isinstance(exc, UnknownTask):
        return A2AError(TASK_NOT_FOUND, exc.message, data)
    if exc.status < 500 and exc.status != 429:
        return A2AError(INVALID_PARAMS, exc.message, data)
    return A2AError(INTERNAL, exc.message, data)
