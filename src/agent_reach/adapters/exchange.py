"""One translated call to a service over the pooled client (a streaming service's
answer left open for its events), failures as agent errors."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from agent_reach.adapters.translation import CompiledTranslation
from agent_reach.errors import AgentFailed
from agent_reach.model.delivery import Delivery
from agent_reach.wire import pool
from agent_reach.wire.failures import Peer, delivery_failure
from agent_reach.wire.http_body import failure_answer
from agent_reach.wire.pool_stream import open_stream
from agent_reach.wire.sse import MEDIA_TYPE as SSE_MEDIA_TYPE
from agent_reach.wire.sse import is_event_stream

SERVICE = Peer("the service")


def variables_of(delivery: Delivery, context: Any = None) -> dict[str, Any]:
    """What a template may read about one delivery."""
    return {
        "payload": delivery.payload,
        "text": delivery.text,
        "request_id": delivery.request_id,
        "capability": delivery.capability,
        "trace_id": delivery.trace_id,
        "context": context,
    }


async def call_service(
    client: pool.HttpPool,
    translation: CompiledTranslation,
    endpoint: str,
    variables: dict[str, Any],
    *,
    headers: list[tuple[str, str]],
    timeout_s: float,
    stream: bool = False,
) -> Any:
    """Send the translated request once and return the mapped result.

    Raises what the Transport protocol names: `AgentUnreachable` when nothing was sent,
    `AgentTimeout` (may have acted), `AgentFailed` for a non-2xx answer (retryable on
    5xx and 429), a SOAP fault (`soap_fault`, never retried) or an unreadable answer.

    With `stream`, the request asks for `text/event-stream` on a connection of its own:
    a service that answers an event stream gives its open `StreamResponse` (the caller
    reads the events, within `timeout_s`, and closes it); any other answer is read
    whole and mapped as a plain call's.
    """
    request = translation.request(endpoint, variables)
    if not stream:
        with agent_errors(timeout_s):
            response = await client.request(
                request.method,
                request.url,
                headers=[*request.headers, *headers],
                body=request.body,
                timeout_s=timeout_s,
            )
        return mapped_answer(translation, response.status, response.body)
    with agent_errors(timeout_s):
        streamed = await open_stream(
            client,
            request.method,
            request.url,
            headers=[*request.headers, ("accept", SSE_MEDIA_TYPE), *headers],
            body=request.body,
            timeout_s=timeout_s,
        )
    if 200 <= streamed.status < 300 and is_event_stream(streamed.header(b"content-type")):
        return streamed
    try:
        with agent_errors(timeout_s):
            body = await streamed.read_all()
    finally:
        streamed.close()
    return mapped_answer(translation, streamed.status, body)


@contextlib.contextmanager
def agent_errors(timeout_s: float) -> Iterator[None]:
    """The pool's failures of a service call as the agent errors the Transport protocol
    names, read as every delivery's are (`wire/failures.py`): whether the service may
    have acted is kept in each."""
    try:
        yield
    except pool.PoolError as exc:
        raise delivery_failure(exc, timeout_s, SERVICE, _unreadable) from None


def _unreadable(exc: pool.ResponseTooLarge | pool.InvalidResponse) -> AgentFailed:
    """The service answered something this cannot read: it had the whole request and may
    have acted, so the failure is final (never re-sent), as an http delivery's is."""
    if isinstance(exc, pool.ResponseTooLarge):
        message, code = "the service's answer is too large", "agent_response_too_large"
    else:
        message, code = f"the service's answer is not valid HTTP: {exc}", "agent_bad_answer"
    return AgentFailed(message, code=code, retryable=False, outcome_unknown=True)


def mapped_answer(translation: CompiledTranslation, status: int, body: bytes) -> Any:
    """A whole answer's result, mapped; a fault or a non-2xx status as `AgentFailed`."""
    translation.raise_fault(body)
    if not 200 <= status < 300:
        failure = AgentFailed(
            f"the service answered HTTP {status}",
            http_status=status,
            agent_answer=failure_answer(body),
            retryable=status >= 500 or status == 429,
        )
        raise failure
    return translation.answer(body)
