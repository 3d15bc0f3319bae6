"""`POST /a2a`: A2A JSON-RPC (v1.0 `SendMessage`/`SendStreamingMessage`/`GetTask`, v0.3
`message/send`/`message/stream`/`tasks/get`).

A message is one invocation: `metadata.capability` names the skill (client-directed),
otherwise its text is routed. Text parts are the text, the first data part the payload,
and a `messageId` that is a valid request id is the request_id (a re-sent message is
answered from the idempotency store, never run twice). A synchronous answer is a
Message; an asynchronous or suspended one a Task, read back with `GetTask`. A streamed
reply is a Task too: its id is the request id (one is made when the message has none),
and `GetTask` reads it from the request's idempotency record, working until the stream
has ended, then with the answer's artifacts.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import orjson
from pydantic import ValidationError

from agent_reach.adapters import a2a_messages as msgs
from agent_reach.errors import ReachError, UnknownTask
from agent_reach.faces.a2a_stream import StreamedReply
from agent_reach.invoke.answer import Answer
from agent_reach.model.invocations import REQUEST_ID_PATTERN, InvokeRequest
from agent_reach.model.keys import Principal, owned_key
from agent_reach.observability.tracecontext import TraceContext
from agent_reach.server.runtime import Runtime

# JSON-RPC 2.0 and A2A error codes (A2A spec, "Error Handling")
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL = (
    -32700,
    -32600,
    -32601,
    -32602,
    -32603,
)
TASK_NOT_FOUND, UNSUPPORTED = -32001, -32004
V1_METHODS = {"SendMessage": "send", "SendStreamingMessage": "stream", "GetTask": "get"}
V03_METHODS = {"message/send": "send", "message/stream": "stream", "tasks/get": "get"}
_REQUEST_ID = re.compile(REQUEST_ID_PATTERN)
_STATES = {  # our task status -> (v1.0, v0.3) state
    "queued": ("TASK_STATE_SUBMITTED", "submitted"),
    "running": ("TASK_STATE_WORKING", "working"),
    "suspended": ("TASK_STATE_WORKING", "working"),
    "ok": ("TASK_STATE_COMPLETED", "completed"),
    "fallback": ("TASK_STATE_COMPLETED", "completed"),
    "degraded": ("TASK_STATE_COMPLETED", "completed"),
    "error": ("TASK_STATE_FAILED", "failed"),
}


class RpcError(Exception):
    """A JSON-RPC error answer; `http_status` 401 without a valid key (HTTP auth), else 200."""

    def __init__(
        self, code: int, message: str, data: dict[str, Any] | None = None, http_status: int = 200
    ) -> None:
        super().__init__(message)
        self.code, self.message, self.data, self.http_status = code, message, data, http_status
        self.call_id: Any = None  # the request's id, once it was read


def rpc_error_of(exc: ReachError) -> RpcError:
    """An Agent-Reach error as the closest JSON-RPC/A2A error, its own code in `data`."""
    data = {"code": exc.code, **{k: v for k, v in exc.details.items() if k != "route"}}
    if exc.status == 401:
        return RpcError(INVALID_REQUEST, exc.message, data, exc.status)
    if exc.status == 403:  # authenticated, not allowed: a typed error the client can read
        return RpcError(INVALID_REQUEST, exc.message, data)
    if isinstance(exc, UnknownTask):
        return RpcError(TASK_NOT_FOUND, exc.message, data)
    if exc.status < 500 and exc.status != 429:
        return RpcError(INVALID_PARAMS, exc.message, data)
    return RpcError(INTERNAL, exc.message, data)


class A2AEndpoint:
    """Answers one JSON-RPC call for one authenticated principal."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def call(
        self, body: bytes, principal: Principal, trace: TraceContext, version_header: str | None
    ) -> tuple[Any, Any]:
        """(id, result) of the call; `RpcError` (with the call's id) for any failure."""
        try:
            call = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise RpcError(PARSE_ERROR, "the body is not JSON") from None
        if not isinstance(call, dict) or call.get("jsonrpc") != "2.0" or "method" not in call:
            raise RpcError(INVALID_REQUEST, "not a JSON-RPC 2.0 request")
        try:
            return call.get("id"), await self._dispatch(call, principal, trace, version_header)
        except RpcError as exc:
            exc.call_id = call.get("id")
            raise

    async def _dispatch(
        self,
        call: dict[str, Any],
        principal: Principal,
        trace: TraceContext,
        version_header: str | None,
    ) -> Any:
        method, params = call["method"], call.get("params") or {}
        if method in V1_METHODS:
            version, action = "1.0", V1_METHODS[method]
        elif method in V03_METHODS:
            version, action = "0.3", V03_METHODS[method]
        else:
            raise RpcError(METHOD_NOT_FOUND, f"method {method!r} is not offered here")
        if version == "1.0" and version_header not in (None, "", "1.0"):
            raise RpcError(-32009, f"A2A version {version_header!r} is not supported: use 1.0")
        if not isinstance(params, dict):
            raise RpcError(INVALID_PARAMS, "params must be an object")
        if action == "send":
            return await self._send(params, version, principal, trace)
        if action == "stream":
            return await self._stream(params, version, principal, trace)
        return await self._get(params, version, principal)

    async def _send(
        self, params: dict[str, Any], version: str, principal: Principal, trace: TraceContext
    ) -> Any:
        message = params.get("message")
        if not isinstance(message, dict):
            raise RpcError(INVALID_PARAMS, "params.message is required")
        request = _invocation(message, params.get("configuration") or {}, version)
        answer = await self.runtime.invoke.handle(request, trace, principal=principal)
        return _result(version, answer, message)

    async def _stream(
        self, params: dict[str, Any], version: str, principal: Principal, trace: TraceContext
    ) -> StreamedReply:
        """The send, asking the routed agent for a stream (`faces/a2a_stream.py`)."""
        message = params.get("message")
        if not isinstance(message, dict):
            raise RpcError(INVALID_PARAMS, "params.message is required")
        request = _invocation(message, params.get("configuration") or {}, version)
        if request.request_id is None:  # the Task's id, read back with GetTask
            request = request.model_copy(update={"request_id": uuid.uuid4().hex})
        answer = await self.runtime.invoke.handle(request, trace, principal=principal, stream=True)
        context_id = message.get("contextId")
        context = context_id if isinstance(context_id, str) else None
        if answer.stream is not None:
            task_id = str(request.request_id)
            return StreamedReply(version, task_id, context, stream=answer.stream)
        return StreamedReply(version, "", context, result=_result(version, answer, message))

    async def _get(self, params: dict[str, Any], version: str, principal: Principal) -> Any:
        task_id = params.get("id")
        if not isinstance(task_id, str) or not _REQUEST_ID.match(task_id):
            raise RpcError(INVALID_PARAMS, "params.id must be a task id")
        try:
            try:
                document = await self.runtime.tasks.get(principal, task_id)
            except UnknownTask:
                document = await self._streamed(principal, task_id)
        except ReachError as exc:
            raise rpc_error_of(exc) from None
        return _task(version, document, None)  # GetTask answers the Task itself

    async def _streamed(self, principal: Principal, task_id: str) -> dict[str, Any]:
        """A streamed reply's Task, from its request's idempotency record."""
        record = await self.runtime.backends.idempotency.peek(owned_key(principal, task_id))
        if record is None:
            raise UnknownTask(f"no task {task_id!r} (unknown or expired)")
        if record.state != "completed":
            return {"task_id": task_id, "status": "running"}
        return {
            "task_id": task_id,
            "http_status": record.status,
            "answer": orjson.loads(record.body),
        }


def _result(version: str, answer: Answer, message: dict[str, Any]) -> Any:
    """A send's result: the reply Message, or the Task of a queued or suspended request."""
    document = orjson.loads(answer.body)
    if answer.status == 202:
        return _wrap(version, "task", _task(version, document, message.get("contextId")))
    if answer.status >= 300:
        raise rpc_error_of(_error_of(answer, document))
    return _wrap(version, "message", _reply(version, document, message.get("contextId")))


def _invocation(
    message: dict[str, Any], configuration: dict[str, Any], version: str
) -> InvokeRequest:
    parts = msgs.parts_of(message.get("parts"))
    metadata = message.get("metadata") or {}
    capability = metadata.get("capability") if isinstance(metadata, dict) else None
    message_id = message.get("messageId")
    asynchronous = (
        configuration.get("returnImmediately") is True
        if version == "1.0"
        else configuration.get("blocking") is False
    )
    data = parts["data"]
    try:
        return InvokeRequest(
            capability=capability,
            text=parts["text"],
            payload=data,
            request_id=message_id
            if isinstance(message_id, str) and _REQUEST_ID.match(message_id)
            else None,
            mode="async" if asynchronous else "sync",
        )
    except ValidationError as exc:
        problems = [
            {"field": ".".join(str(p) for p in e["loc"]), "message": e["msg"]} for e in exc.errors()
        ]
        raise RpcError(
            INVALID_PARAMS,
            "the message gives neither a skill (metadata.capability) nor text",
            {"code": "validation_error", "problems": problems},
        ) from None


def _error_of(answer: Answer, document: Any) -> ReachError:
    error = document.get("error", {}) if isinstance(document, dict) else {}
    exc = ReachError(str(error.get("message", "")), code=str(error.get("code", "internal_error")))
    exc.status = answer.status  # type: ignore[misc]
    exc.details = {k: v for k, v in error.items() if k not in ("code", "message")}
    return exc


def _parts(version: str, result: Any) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if isinstance(result, str):
        parts.append({"text": result})
    elif isinstance(result, dict) and isinstance(result.get("text"), str):
        parts.append({"text": result["text"]})
    if result is not None and not isinstance(result, str):
        parts.append({"data": result if isinstance(result, dict) else {"value": result}})
    if version == "0.3":
        for part in parts:
            part["kind"] = "text" if "text" in part else "data"
    return parts


def _reply(version: str, document: dict[str, Any], context_id: Any) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_AGENT" if version == "1.0" else "agent",
        "parts": _parts(version, document.get("result")),
        "metadata": {
            key: document.get(key) for key in ("request_id", "trace_id", "agent_id", "status")
        },
    }
    if isinstance(context_id, str):
        reply["contextId"] = context_id
    if version == "0.3":
        reply["kind"] = "message"
    return reply


def _task(version: str, document: dict[str, Any], context_id: Any) -> dict[str, Any]:
    """Our task view (202 answer or `GET /v1/tasks`) as an A2A Task."""
    status = str(document.get("status", "queued"))
    answer = document.get("answer")
    if document.get("http_status") is not None and isinstance(answer, dict):
        status = str(answer.get("status") or ("error" if "error" in answer else "ok"))
    v1, v03 = _STATES.get(status, _STATES["running"])
    task_id = str(document.get("task_id") or document.get("request_id"))
    task: dict[str, Any] = {
        "id": task_id,
        "contextId": context_id if isinstance(context_id, str) else task_id,
        "status": {"state": v1 if version == "1.0" else v03},
    }
    if isinstance(answer, dict) and "result" in answer:
        task["artifacts"] = [
            {"artifactId": f"{task_id}-result", "parts": _parts(version, answer["result"])}
        ]
    elif isinstance(answer, dict) and isinstance(answer.get("error"), dict):
        text = str(answer["error"].get("message", ""))
        task["status"]["message"] = {
            "messageId": uuid.uuid4().hex,
            "role": "ROLE_AGENT" if version == "1.0" else "agent",
            "parts": _parts(version, {"text": text, **answer["error"]}),
        }
        if version == "0.3":
            task["status"]["message"]["kind"] = "message"
    if version == "0.3":
        task["kind"] = "task"
    return task


def _wrap(version: str, kind: str, value: dict[str, Any]) -> Any:
    """v1.0 answers `{"message": ...}` / `{"task": ...}`; v0.3 the object itself."""
    return value if version == "0.3" else {kind: value}
