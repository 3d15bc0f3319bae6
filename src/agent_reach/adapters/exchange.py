"""One translated call to a service over the pooled client, failures as agent errors."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from agent_reach.adapters.translation import CompiledTranslation
from agent_reach.errors import AgentFailed, AgentTimeout, AgentUnreachable
from agent_reach.model.delivery import Delivery
from agent_reach.wire import pool


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
) -> Any:
    """Send the translated request once and return the mapped result.

    Raises what the Transport protocol names: `AgentUnreachable` when nothing was sent,
    `AgentTimeout` (may have acted), `AgentFailed` for a non-2xx answer (retryable on
    5xx and 429), a SOAP fault (`soap_fault`, never retried) or an unreadable answer.
    """
    request = translation.request(endpoint, variables)
    with agent_errors(timeout_s):
        response = await client.request(
            request.method,
            request.url,
            headers=[*request.headers, *headers],
            body=request.body,
            timeout_s=timeout_s,
        )
    return mapped_answer(translation, response.status, response.body)


@contextlib.contextmanager
def agent_errors(timeout_s: float) -> Iterator[None]:
    """The pool's failures of a service call as the agent errors the Transport protocol
    names (whether the service may have acted is kept in each)."""
    try:
        yield
    except pool.ConnectFailed as exc:
        raise AgentUnreachable(f"could not connect to the service: {exc}") from None
    except pool.RequestTimeout as exc:
        raise AgentTimeout(f"no answer within {timeout_s:g} s", outcome_unknown=exc.sent) from None
    except pool.ConnectionLost as exc:
        if not exc.sent:
            raise AgentUnreachable("the connection closed before the request was sent") from None
        raise AgentFailed(
            "the connection closed before the service answered", outcome_unknown=True
        ) from None
    except pool.ResponseTooLarge:
        raise AgentFailed(
            "the service's answer is too large", code="agent_response_too_large"
        ) from None
    except pool.InvalidResponse as exc:
        raise AgentFailed(f"the service's answer is not valid HTTP: {exc}") from None


def mapped_answer(translation: CompiledTranslation, status: int, body: bytes) -> Any:
    """A whole answer's result, mapped; a fault or a non-2xx status as `AgentFailed`."""
    # Here, not at the top: `invoke.transports` imports its translated transport, which
    # imports this module; imported first (`agent-reach sidecar`), the cycle broke.
    from agent_reach.wire.http_body import failure_answer

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
