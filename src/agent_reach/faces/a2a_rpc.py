"""`POST /a2a`: the JSON-RPC 2.0 binding of the A2A face, v1.0 method names and v0.3 ones.

`answer_rpc` takes the raw body and the authenticated principal and returns the status
and body to send (or a stream to relay): no ASGI in it, so any edge can call it. The
envelope is checked as JSON-RPC 2.0 prescribes — unparseable JSON `-32700`; a batch, a
wrong `jsonrpc`, a missing `method` or an id that is not a string, number or null
`-32600`, with the request's id where it has a usable one. v1.0 calls take an
`A2A-Version` header of 1.0, any patch (or none); another version is `-32009`. An error's `data`
is a list of typed details (A2A v1.0.1: `[{"@type": ".../google.rpc.ErrorInfo", "reason",
"domain", "metadata": <the error's data>}]`). v0.3 calls are answered in the v0.3 form
(`kind`s, lower-case states, an error's data as the object itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from agent_reach.faces import a2a_tasks as views
from agent_reach.faces.a2a_errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNSUPPORTED,
    VERSION_NOT_SUPPORTED,
    A2AError,
    error_info,
)
from agent_reach.faces.a2a_push import PushConfigs
from agent_reach.faces.a2a_service import A2AFace
from agent_reach.faces.a2a_stream import StreamedReply
from agent_reach.model.keys import Principal
from agent_reach.observability.tracecontext import TraceContext

if TYPE_CHECKING:
    from agent_reach.faces.handler import FaceHandler

SERVED_VERSIONS = ("1.0", "0.3")  # A2A-Version values this face answers
V1_METHODS = {
    "SendMessage": "send",
    "SendStreamingMessage": "stream",
    "GetTask": "get",
    "ListTasks": "list",
    "CancelTask": "cancel",
    "CreateTaskPushNotificationConfig": "push_create",
    "GetTaskPushNotificationConfig": "push_get",
    "ListTaskPushNotificationConfigs": "push_list",
    "DeleteTaskPushNotificationConfig": "push_delete",
    "SubscribeToTask": "subscribe",
    "GetExtendedAgentCard": "extended_card",
}
V03_METHODS = {
    "message/send": "send",
    "message/stream": "stream",
    "tasks/get": "get",
    "tasks/list": "list",
    "tasks/cancel": "cancel",
    "tasks/pushNotificationConfig/set": "push_create",
    "tasks/pushNotificationConfig/get": "push_get",
    "tasks/pushNotificationConfig/list": "push_list",
    "tasks/pushNotificationConfig/delete": "push_delete",
    "tasks/resubscribe": "subscribe",
    "agent/getAuthenticatedExtendedCard": "extended_card",
}


def serves_v1(version: str | None) -> bool:
    """A v1.0 call's `A2A-Version` is served: none, or 1.0 whatever its patch (`1`,
    `1.0`, `1.0.1`; the spec: patch numbers are not negotiated)."""
    if not version:
        return True
    major, _, rest = version.strip().partition(".")
    minor = rest.partition(".")[0]
    return major == "1" and minor in ("", "0")


@dataclass(frozen=True, slots=True)
class RpcAnswer:
    """What to send back: a JSON body, or (`stream`) an event stream for call `call_id`."""

    status: int = 200
    body: bytes = b""
    stream: StreamedReply | None = None
    call_id: Any = None


def error_answer(exc: A2AError, call_id: Any, version: str = "1.0") -> RpcAnswer:
    """The JSON-RPC error response; its `data` a list of typed details (A2A v1.0.1: one
    `google.rpc.ErrorInfo` whose metadata is the error's data), or for a v0.3 method the
    data object itself, as v0.3 had it."""
    error: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if version == "0.3":
        if exc.data is not None:
            error["data"] = exc.data
    else:
        error["data"] = [error_info(exc)]
    body = orjson.dumps({"jsonrpc": "2.0", "id": call_id, "error": error})
    return RpcAnswer(exc.http_status or 200, body, call_id=call_id)


async def answer_rpc(
    handler: FaceHandler,
    body: bytes,
    principal: Principal,
    trace: TraceContext,
    version_header: str | None,
) -> RpcAnswer:
    """The answer to one JSON-RPC request body for an authenticated principal."""
    call_id: Any = None
    version = "1.0"
    try:
        call = _envelope(body)
        call_id = call.get("id")
        version = "0.3" if call["method"] in V03_METHODS else "1.0"
        result = await _dispatch(A2AFace(handler), call, principal, trace, version_header)
    except A2AError as exc:
        return error_answer(exc, call_id if call_id is not None else exc.call_id, version)
    if isinstance(result, StreamedReply):
        return RpcAnswer(stream=result, call_id=call_id)
    return RpcAnswer(body=orjson.dumps({"jsonrpc": "2.0", "id": call_id, "result": result}))


def _envelope(body: bytes) -> dict[str, Any]:
    """The request object; `A2AError` (-32700 / -32600, with its id when usable) if none."""
    try:
        call = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise A2AError(PARSE_ERROR, "the body is not JSON") from None
    if isinstance(call, list):
        raise A2AError(INVALID_REQUEST, "batch requests are not supported: send one at a time")
    if not isinstance(call, dict):
        raise A2AError(INVALID_REQUEST, "a JSON-RPC request is an object")
    call_id = call.get("id")
    if call_id is not None and (isinstance(call_id, bool) or not isinstance(call_id, str | int)):
        raise A2AError(INVALID_REQUEST, "id must be a string, an integer or null")
    problem = None
    if call.get("jsonrpc") != "2.0":
        problem = 'jsonrpc must be "2.0"'
    elif not isinstance(call.get("method"), str):
        problem = "method (a string) is required"
    elif "params" in call and not isinstance(call["params"], dict | None):
        raise A2AError(INVALID_PARAMS, "params must be an object", call_id=call_id)
    if problem is not None:
        raise A2AError(INVALID_REQUEST, problem, call_id=call_id)
    return call


async def _dispatch(
    face: A2AFace,
    call: dict[str, Any],
    principal: Principal,
    trace: TraceContext,
    version_header: str | None,
) -> Any:
    method, params = call["method"], call.get("params") or {}
    if method in V1_METHODS:
        version, action = "1.0", V1_METHODS[method]
        if not serves_v1(version_header):
            raise A2AError(
                VERSION_NOT_SUPPORTED,
                f"A2A version {version_header!r} is not served: use one of {SERVED_VERSIONS}",
                {"supported": list(SERVED_VERSIONS)},
            )
    elif method in V03_METHODS:
        version, action = "0.3", V03_METHODS[method]
    else:
        raise A2AError(METHOD_NOT_FOUND, f"method {method!r} is not offered here")
    if action == "stream":
        return await face.stream(params, principal, trace, version)
    result = await _act(face, action, params, version, principal, trace)
    return _shaped(action, result, version)


async def _act(
    face: A2AFace,
    action: str,
    params: dict[str, Any],
    version: str,
    principal: Principal,
    trace: TraceContext,
) -> Any:
    if action == "send":
        return await face.send(params, principal, trace)
    if action == "get":
        return await face.get(params, principal)
    if action == "list":
        return await face.list(params, principal)
    if action == "cancel":
        return await face.cancel(params, principal)
    if action == "subscribe":
        raise A2AError(UNSUPPORTED, "re-subscribing to a task is not offered: poll GetTask")
    if action == "extended_card":
        raise A2AError(  # the card declares no extended card (the spec's CORE-CAP-003)
            UNSUPPORTED, "GetExtendedAgentCard is not offered: the public card is all"
        )
    configs = PushConfigs(face)
    if version == "0.3":
        params = _push_params_v03(action, params)
    if action == "push_create":
        return await configs.create({**params, "_version": version}, principal)
    if action == "push_get":
        return await configs.get(params, principal)
    if action == "push_list":
        return await configs.list(params, principal)
    await configs.delete(params, principal)
    return None


def _push_params_v03(action: str, params: dict[str, Any]) -> dict[str, Any]:
    """v0.3 push params in v1.0 names (`{taskId, pushNotificationConfig}`, `{id,
    pushNotificationConfigId}`)."""
    if action == "push_create":
        inner = params.get("pushNotificationConfig") or {}
        return {**(inner if isinstance(inner, dict) else {}), "taskId": params.get("taskId")}
    return {"taskId": params.get("id"), "id": params.get("pushNotificationConfigId")}


def _shaped(action: str, result: Any, version: str) -> Any:
    """The v1.0 result, or its v0.3 form."""
    if version == "1.0" or result is None:
        return result
    if action == "send":
        kind, value = next(iter(result.items()))
        return views.v03(value, kind)
    if action in ("get", "cancel"):
        return views.v03(result, "task")
    if action == "list":
        return {**result, "tasks": [views.v03(t, "task") for t in result["tasks"]]}
    if action == "push_list":
        return [_push_v03(c) for c in result["configs"]]
    return _push_v03(result)


def _push_v03(config: dict[str, Any]) -> dict[str, Any]:
    inner = {k: v for k, v in config.items() if k != "taskId"}
    return {"taskId": config.get("taskId"), "pushNotificationConfig": inner}
