"""`POST /v1/invoke` as a bare ASGI handler: the hot path skips the framework.

Measured (bench/overhead.py): FastAPI's routing, dependency solving and response
encoding cost more than routing and delivery together, so the one endpoint whose
microseconds matter reads its body, validates it with pydantic-core and answers
with orjson directly. Everything else goes through FastAPI.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from agent_reach.errors import InvalidRequest, PayloadTooLarge, ReachError
from agent_reach.invoke.service import InvokeService
from agent_reach.model.invocations import InvokeRequest
from agent_reach.observability.tracecontext import continue_trace
from agent_reach.server.errors import invalid_body
from agent_reach.server.limits import check_headers
from agent_reach.server.responses import dump_json

Scope = dict[str, Any]
_JSON_HEADERS = [(b"content-type", b"application/json")]


async def read_body(receive: Any, limit: int, declared: int | None) -> bytes:
    """The whole body, refusing more than `limit` bytes as soon as that is known."""
    if declared is not None and declared > limit:
        raise PayloadTooLarge(f"the body is larger than {limit} bytes", limit=limit)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise InvalidRequest(
                "the client went away before sending the body", code="disconnected"
            )
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"the body is larger than {limit} bytes", limit=limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def handle_invoke(
    scope: Scope, receive: Any, send: Any, service: InvokeService, limit: int
) -> None:
    """Authenticate, validate, invoke, answer; bad input becomes its error body and status."""
    authorization: list[str] = []
    traceparent: str | None = None
    hop_header: bytes | None = None
    deadline_header: bytes | None = None
    declared: int | None = None
    header_bytes = 0
    for name, value in scope["headers"]:
        header_bytes += len(name) + len(value)
        if name == b"authorization":
            authorization.append(value.decode("latin-1"))
        elif name == b"traceparent":
            traceparent = value.decode("latin-1")
        elif name == b"x-reach-hop":
            hop_header = value
        elif name == b"x-reach-deadline-ms":
            deadline_header = value
        elif name == b"content-length" and value.isdigit():
            declared = int(value)
    trace = continue_trace(traceparent)
    try:
        check_headers(len(scope["headers"]), header_bytes)
        if len(authorization) > 1:
            raise InvalidRequest("send one Authorization header", code="duplicate_authorization")
        principal = await service.security.authenticate(authorization[0] if authorization else None)
        body = await read_body(receive, limit, declared)
        try:
            request = InvokeRequest.model_validate_json(body)
        except ValidationError as exc:
            raise invalid_body(exc.errors()) from None
        hop_budget = _count(hop_header, "X-Reach-Hop", "invalid_hop")
        deadline_ms = _count(deadline_header, "X-Reach-Deadline-Ms", "invalid_deadline")
    except ReachError as exc:
        exc.details.setdefault("trace_id", trace.trace_id)
        await _send(send, exc.status, dump_json(exc.to_body()), trace.trace_id, exc.retry_after())
        return
    answer = await service.handle(
        request, trace, hop_budget=hop_budget, deadline_ms=deadline_ms, principal=principal
    )
    await _send(send, answer.status, answer.body, trace.trace_id, answer.retry_after)


def _count(header: bytes | None, name: str, code: str) -> int | None:
    """A header holding a non-negative integer, or None when absent."""
    if header is None:
        return None
    value = header.strip()
    if not value.isdigit() or len(value) > 12:
        raise InvalidRequest(f"{name} must be a non-negative integer", code=code)
    return int(value)


async def _send(
    send: Any, status: int, body: bytes, trace_id: str, retry_after: str | None = None
) -> None:
    headers = [*_JSON_HEADERS, (b"x-trace-id", trace_id.encode())]
    if retry_after is not None:
        headers.append((b"retry-after", retry_after.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
