"""The A2A face's errors: JSON-RPC 2.0 and A2A codes, `A2AError`, and an Agent-Reach
error as the closest of them. Both bindings answer with these (REST maps them to HTTP);
both carry the error's data as A2A v1.0.1 typed details (`error_info`)."""

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
CONTENT_TYPE_NOT_SUPPORTED = -32005
VERSION_NOT_SUPPORTED = -32009
# JSON-RPC code -> (HTTP status, google.rpc status, A2A reason): the A2A spec's table
REASONS = {
    -32001: (404, "NOT_FOUND", "TASK_NOT_FOUND"),
    -32002: (400, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE"),
    -32003: (400, "FAILED_PRECONDITION", "PUSH_NOTIFICATION_NOT_SUPPORTED"),
    -32004: (400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION"),
    -32005: (415, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED"),
    -32007: (400, "FAILED_PRECONDITION", "EXTENDED_AGENT_CARD_NOT_CONFIGURED"),
    -32009: (400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED"),
    -32700: (400, "INVALID_ARGUMENT", "INVALID_REQUEST"),
    -32600: (400, "INVALID_ARGUMENT", "INVALID_REQUEST"),
    -32601: (404, "NOT_FOUND", "METHOD_NOT_FOUND"),
    -32602: (400, "INVALID_ARGUMENT", "INVALID_PARAMS"),
    -32603: (500, "INTERNAL", "INTERNAL_ERROR"),
}
ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
A2A_DOMAIN = "a2a-protocol.org"


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


def error_info(exc: A2AError, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """The error as a `google.rpc.ErrorInfo` detail (A2A v1.0.1: the JSON-RPC error's
    `data` and the HTTP+JSON error's `details` are lists of such `@type` objects); its
    `metadata` is the error's data unless the binding gives its own form of it."""
    info: dict[str, Any] = {
        "@type": ERROR_INFO_TYPE,
        "reason": REASONS.get(exc.code, REASONS[INTERNAL])[2],
        "domain": A2A_DOMAIN,
    }
    given = exc.data if metadata is None else metadata
    if given:
        info["metadata"] = given
    return info


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
