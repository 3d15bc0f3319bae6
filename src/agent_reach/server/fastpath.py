"""`POST /v1/invoke` without the framework: one function for the edge server and ASGI.

Measured (bench/overhead.py): FastAPI's routing, dependency solving and response
encoding cost more than routing and delivery together, so the one endpoint whose
microseconds matter reads its body, validates it with pydantic-core and answers
with orjson directly. `answer_invoke` holds that logic; the edge server
(`server/edge_connection.py`) calls it with a body it parsed itself, `handle_invoke`
with a body read from ASGI messages.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from functools import partial
from itertools import chain
from typing import Any

import orjson
from pydantic import ValidationError

from agent_reach.errors import InvalidRequest, ReachError
from agent_reach.identity.certificates import PeerCertificate, peer_of
from agent_reach.invoke.service import InvokeService
from agent_reach.model.invocations import InvokeRequest
from agent_reach.observability.tracecontext import continue_trace, new_trace
from agent_reach.server.edge_stream import relay_asgi
from agent_reach.server.errors import invalid_body
from agent_reach.server.limits import MAX_HEADER_BYTES, MAX_HEADERS, check_headers
from agent_reach.server.media import JSON_MEDIA, check_json_body
from agent_reach.wire.answer import Answer
from agent_reach.wire.asgi_body import body_too_large as body_too_large
from agent_reach.wire.asgi_body import read_body
from agent_reach.wire.event_stream import EventStream
from agent_reach.wire.sse import accepts_event_stream

Scope = dict[str, Any]
Headers = Sequence[tuple[bytes, bytes]]
# Given the declared Content-Length (None when absent): the whole body, or
# `PayloadTooLarge` once it is known to pass the limit.
BodyReader = Callable[[int | None], Awaitable[bytes]]
_JSON_HEADERS = [(b"content-type", b"application/json")]
MAX_HEADER_COUNT = 10**12 - 1  # hops or milliseconds (31 years): beyond any real budget


async def answer_invoke(
    service: InvokeService,
    headers: Headers,
    body: bytes | BodyReader,
    peer: PeerCertificate | None = None,
) -> tuple[Answer, str]:
    """Authenticate, validate, invoke: the answer and its trace id. Bad input becomes
    its error answer; `headers` are (lower-case name, value) pairs; `body` the whole
    body when it has already been read, else how to read it; `peer` the connection's
    verified client certificate, the credential when there is no Authorization."""
    fields = dict(headers)  # a name sent twice: its last value
    header_bytes = sum(map(len, chain.from_iterable(headers)))
    repeated = len(fields) < len(headers)
    length = fields.get(b"content-length")
    if repeated:  # the last Content-Length that is a number
        length = next(
            (v for n, v in reversed(headers) if n == b"content-length" and v.isdigit()), None
        )
    declared = int(length) if length is not None and length.isdigit() else None
    traceparent = fields.get(b"traceparent")
    trace = new_trace() if traceparent is None else continue_trace(traceparent.decode("latin-1"))
    try:
        if len(headers) > MAX_HEADERS or header_bytes > MAX_HEADER_BYTES:
            check_headers(len(headers), header_bytes)
        service.security.origins.check("/v1/invoke", fields.get(b"host"), fields.get(b"origin"))
        if repeated and sum(name == b"authorization" for name, _ in headers) > 1:
            raise InvalidRequest("send one Authorization header", code="duplicate_authorization")
        content_type = fields.get(b"content-type")
        if declared != 0 and content_type is not None and content_type != JSON_MEDIA:
            check_json_body(content_type)
        authorization = fields.get(b"authorization")
        security = service.security
        presented = None if authorization is None else authorization.decode("latin-1")
        principal = security.authenticate_cached(presented, peer)
        if principal is None:
            principal = await security.authenticate(presented, peer)
        raw = body if isinstance(body, bytes) else await body(declared)
        try:  # `model_validate_json` without its frame: the same validator, the same errors
            request = InvokeRequest.__pydantic_validator__.validate_json(raw)
        except ValidationError as exc:
            raise invalid_body(exc.errors()) from None
        hop, deadline = fields.get(b"x-reach-hop"), fields.get(b"x-reach-deadline-ms")
        hop_budget = None if hop is None else _count(hop, "X-Reach-Hop", "invalid_hop")
        deadline_ms = (
            None
            if deadline is None
            else _count(deadline, "X-Reach-Deadline-Ms", "invalid_deadline")
        )
    except ReachError as exc:
        exc.details.setdefault("trace_id", trace.trace_id)
        return Answer.of_error(exc), trace.trace_id
    # Most callers send `*/*` or JSON: the substring test keeps them off the parser.
    accept = fields.get(b"accept")
    stream = accept is not None and b"event-stream" in accept.lower()
    stream = stream and accepts_event_stream(accept)
    answer = await service.handle(
        request,
        trace,
        hop_budget=hop_budget,
        deadline_ms=deadline_ms,
        principal=principal,
        stream=stream,
    )
    if stream and answer.stream is None and answer.status == 200:
        # A whole answer to a caller who asked for a stream: one last event.
        answer = replace(answer, stream=EventStream.of_answer(orjson.loads(answer.body)))
    return answer, trace.trace_id


async def handle_invoke(
    scope: Scope, receive: Any, send: Any, service: InvokeService, limit: int
) -> None:
    """`answer_invoke` as a bare ASGI handler."""
    answer, trace_id = await answer_invoke(
        service, scope["headers"], partial(read_body, receive, limit), peer_of(scope)
    )
    if answer.stream is not None:
        await relay_asgi(answer.stream, [(b"x-trace-id", trace_id.encode())], receive, send)
        return
    headers = [*_JSON_HEADERS, (b"x-trace-id", trace_id.encode())]
    if answer.retry_after is not None or answer.challenge is not None:
        headers += [(name.encode(), value.encode()) for name, value in answer.error_headers()]
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})


def _count(header: bytes, name: str, code: str) -> int:
    """A header holding a whole number up to `MAX_HEADER_COUNT`."""
    value = header.strip()
    if not value.isdigit():
        raise InvalidRequest(f"{name} must be a whole number of 0 or more", code=code)
    if len(value) > len(str(MAX_HEADER_COUNT)) or int(value) > MAX_HEADER_COUNT:
        raise InvalidRequest(
            f"{name} is too large ({len(value)} digits): at most {MAX_HEADER_COUNT}", code=code
        )
    return int(value)
