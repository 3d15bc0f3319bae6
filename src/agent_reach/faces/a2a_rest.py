"""The HTTP+JSON (REST) binding of the A2A face, v1.0, under `/a2a`.

`POST /a2a/message:send` and `:stream`, `GET /a2a/tasks/{id}`, `GET /a2a/tasks`,
`POST /a2a/tasks/{id}:cancel` and `/a2a/tasks/{id}/pushNotificationConfigs[/{config id}]`
call the same operations as the JSON-RPC binding (`a2a_service.py`). Errors are
`google.rpc.Status` bodies as the A2A spec's REST binding prescribes: `{"error": {"code":
<HTTP status>, "status", "message", "details": [{"@type": ".../google.rpc.ErrorInfo",
"reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org", "metadata"}]}}`, so a client
maps each back to its A2A error. An `A2A-Version` other than 1.0 is 400
`VERSION_NOT_SUPPORTED`. Bodies are read whatever their JSON media type
(`application/json`, or v1.0.1's `application/a2a+json`) and answered as
`application/a2a+json`, which any JSON client reads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response, StreamingResponse

from agent_reach.errors import ReachError
from agent_reach.faces.a2a_errors import (
    INTERNAL,
    INVALID_PARAMS,
    REASONS,
    VERSION_NOT_SUPPORTED,
    A2AError,
    error_info,
    error_of,
)
from agent_reach.faces.a2a_push import PushConfigs
from agent_reach.faces.a2a_rpc import serves_v1
from agent_reach.faces.a2a_service import A2AFace
from agent_reach.faces.a2a_stream import StreamedReply, sse_body
from agent_reach.faces.handler import FaceHandler, handler_of
from agent_reach.identity.certificates import PeerCertificate, peer_of
from agent_reach.model.keys import Principal
from agent_reach.observability.tracecontext import continue_trace

router = APIRouter(tags=["a2a"])
MEDIA_TYPE = "application/a2a+json"  # A2A v1.0.1, HTTP+JSON binding
_STATUS_NAMES = {401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED"}
_INT_QUERY = ("pageSize", "historyLength")


def status_body(exc: A2AError) -> Response:
    """An A2A error as a `google.rpc.Status` response."""
    status, name, _ = REASONS.get(exc.code, REASONS[INTERNAL])
    if exc.http_status is not None:
        status, name = exc.http_status, _STATUS_NAMES.get(exc.http_status, name)
    elif exc.data and exc.data.get("code") == "forbidden":
        status, name = 403, _STATUS_NAMES[403]
    data = exc.data or {}
    metadata = {  # google.rpc.ErrorInfo's metadata is a map of strings
        k: v if isinstance(v, str) else orjson.dumps(v).decode() for k, v in data.items()
    }
    info = error_info(exc, metadata)
    body = {"error": {"code": status, "status": name, "message": exc.message, "details": [info]}}
    return Response(orjson.dumps(body), status, media_type=MEDIA_TYPE)


async def _principal(request: Request) -> Principal:
    return await _authenticated(
        handler_of(request),
        request.headers.get("a2a-version"),
        request.headers.get("authorization"),
        peer_of(request.scope),
    )


async def _authenticated(
    handler: FaceHandler,
    version: str | None,
    authorization: str | None,
    peer: PeerCertificate | None,
) -> Principal:
    if not serves_v1(version):
        raise A2AError(
            VERSION_NOT_SUPPORTED, f"A2A version {version!r} is not served on this binding: use 1.0"
        )
    try:
        return await handler.authenticate(authorization, peer)
    except ReachError as exc:
        raise error_of(exc) from None


async def _body(request: Request) -> dict[str, Any]:
    return _parsed(await request.body())


def _parsed(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise A2AError(-32700, "the body is not JSON") from None
    if not isinstance(body, dict):
        raise A2AError(INVALID_PARAMS, "the body must be a JSON object")
    return body


def _query(request: Request) -> dict[str, Any]:
    params: dict[str, Any] = dict(request.query_params)
    for name in _INT_QUERY:
        if name in params:
            try:
                params[name] = int(params[name])
            except ValueError:
                raise A2AError(INVALID_PARAMS, f"{name} must be a whole number") from None
    if "includeArtifacts" in params:
        params["includeArtifacts"] = params["includeArtifacts"].lower() == "true"
    return params


def _json(value: Any) -> Response:
    return Response(orjson.dumps(value), media_type=MEDIA_TYPE)


@router.post("/a2a/message:send")
async def send(request: Request) -> Response:
    """`SendMessage`: a SendMessageResponse (`{"message"}` or `{"task"}`)."""
    headers = request.headers
    status, body = await send_answer(
        handler_of(request),
        request.body,
        headers.get("a2a-version"),
        headers.get("authorization"),
        peer_of(request.scope),
        headers.get("traceparent"),
    )
    return Response(body, status, media_type=MEDIA_TYPE)


async def send_answer(
    handler: FaceHandler,
    body: Callable[[], Awaitable[bytes]],
    version: str | None,
    authorization: str | None,
    peer: PeerCertificate | None,
    traceparent: str | None,
) -> tuple[int, bytes]:
    """`POST /a2a/message:send` without ASGI (the edge's fast path calls it too): the
    status and JSON body; `body` reads the request body, after authentication."""
    try:
        principal = await _authenticated(handler, version, authorization, peer)
        face = A2AFace(handler)
        trace = continue_trace(traceparent)
        return 200, orjson.dumps(await face.send(_parsed(await body()), principal, trace))
    except A2AError as exc:
        response = status_body(exc)
        return response.status_code, bytes(response.body)


@router.post("/a2a/message:stream")
async def stream(request: Request) -> Response:
    """`SendStreamingMessage`: server-sent StreamResponses."""
    try:
        principal = await _principal(request)
        face = A2AFace(handler_of(request))
        trace = continue_trace(request.headers.get("traceparent"))
        reply: StreamedReply = await face.stream(await _body(request), principal, trace, "1.0")
    except A2AError as exc:
        return status_body(exc)
    return StreamingResponse(
        sse_body(None, reply, rpc=False),
        media_type="text/event-stream",
        headers={"cache-control": "no-cache"},
    )


@router.get("/a2a/tasks")
async def list_tasks(request: Request) -> Response:
    """`ListTasks`, its parameters in the query."""
    try:
        principal = await _principal(request)
        return _json(await A2AFace(handler_of(request)).list(_query(request), principal))
    except A2AError as exc:
        return status_body(exc)


@router.get("/a2a/tasks/{task_id}")
async def get_task(request: Request, task_id: str) -> Response:
    """`GetTask` (`?historyLength=`)."""
    try:
        principal = await _principal(request)
        params = {**_query(request), "id": task_id}
        return _json(await A2AFace(handler_of(request)).get(params, principal))
    except A2AError as exc:
        return status_body(exc)


@router.post("/a2a/tasks/{task_ref}")
async def task_action(request: Request, task_ref: str) -> Response:
    """`POST /a2a/tasks/{id}:cancel` (`:subscribe` is not offered)."""
    try:
        principal = await _principal(request)
        task_id, _, verb = task_ref.rpartition(":")
        if verb != "cancel" or not task_id:
            raise A2AError(-32601, f"no such task action {verb!r}: only :cancel")
        return _json(await A2AFace(handler_of(request)).cancel({"id": task_id}, principal))
    except A2AError as exc:
        return status_body(exc)


@router.post("/a2a/tasks/{task_id}/pushNotificationConfigs")
async def create_push(request: Request, task_id: str) -> Response:
    """`CreateTaskPushNotificationConfig`: the config as set."""
    try:
        principal = await _principal(request)
        configs = PushConfigs(A2AFace(handler_of(request)))
        body = {**(await _body(request)), "taskId": task_id}
        return _json(await configs.create(body, principal))
    except A2AError as exc:
        return status_body(exc)


@router.get("/a2a/tasks/{task_id}/pushNotificationConfigs")
async def list_push(request: Request, task_id: str) -> Response:
    try:
        principal = await _principal(request)
        configs = PushConfigs(A2AFace(handler_of(request)))
        return _json(await configs.list({"taskId": task_id}, principal))
    except A2AError as exc:
        return status_body(exc)


@router.get("/a2a/tasks/{task_id}/pushNotificationConfigs/{config_id}")
async def get_push(request: Request, task_id: str, config_id: str) -> Response:
    try:
        principal = await _principal(request)
        configs = PushConfigs(A2AFace(handler_of(request)))
        return _json(await configs.get({"taskId": task_id, "id": config_id}, principal))
    except A2AError as exc:
        return status_body(exc)


@router.delete("/a2a/tasks/{task_id}/pushNotificationConfigs/{config_id}")
async def delete_push(request: Request, task_id: str, config_id: str) -> Response:
    try:
        principal = await _principal(request)
        configs = PushConfigs(A2AFace(handler_of(request)))
        await configs.delete({"taskId": task_id, "id": config_id}, principal)
        return _json({})
    except A2AError as exc:
        return status_body(exc)
