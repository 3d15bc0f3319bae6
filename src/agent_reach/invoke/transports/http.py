"""The `http` transport: the agent contract of DESIGN.md over one pooled HTTP/1.1 client."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import orjson

from agent_reach.errors import (
    AgentFailed,
    AgentTimeout,
    AgentUnreachable,
    HopLimit,
    ValidationFailed,
)
from agent_reach.invoke import pool
from agent_reach.invoke.delivery import Delivery
from agent_reach.model.agents import TransportSpec

ERROR_EXCERPT_BYTES = 512  # how much of a failing agent's answer the caller gets to see
REFUSED = "endpoint_not_allowed"  # the endpoint guard's code: one code for every bad endpoint


def check_http_url(url: str, field: str = "endpoint") -> None:
    """An absolute http(s) URL with a host, no credentials, no control characters."""
    if any(ord(ch) < 0x21 or ch == "\x7f" for ch in url):
        raise ValidationFailed(
            f"{field} contains whitespace or control characters", code=REFUSED, field=field
        )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationFailed(
            f"{field} must be an absolute http(s) URL", code=REFUSED, field=field
        )
    if parts.username is not None or parts.password is not None:
        raise ValidationFailed(f"{field} must not carry credentials", code=REFUSED, field=field)
    try:
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError as exc:
        raise ValidationFailed(f"{field} has an invalid port", code=REFUSED, field=field) from exc


def health_url(spec: TransportSpec) -> str:
    """The health endpoint: as registered, else `/health` on the endpoint's origin."""
    if spec.health_endpoint:
        return spec.health_endpoint
    parts = urlsplit(spec.endpoint)
    return f"{parts.scheme}://{parts.netloc}/health"


def _is_retryable(response: pool.Response) -> bool:
    """5xx and 429 may succeed elsewhere; 4xx are the request's own fault; an agent may
    say `X-Reach-Retryable: false` to stop any further attempt."""
    for name, value in response.headers:
        if name == b"x-reach-retryable":
            return value.strip().lower() not in (b"false", b"0", b"no")
    return response.status >= 500 or response.status == 429


class HttpTransport:
    """POST the delivery as JSON; 2xx with a JSON body is the result, anything else failed."""

    def __init__(self, client: pool.HttpPool) -> None:
        self.client = client

    def check(self, spec: TransportSpec) -> None:
        check_http_url(spec.endpoint)
        if spec.health_endpoint is not None:
            check_http_url(spec.health_endpoint, "health_endpoint")

    async def deliver(
        self, spec: TransportSpec, delivery: Delivery, *, traceparent: str, timeout_s: float
    ) -> Any:
        try:
            response = await self.client.request(
                "POST",
                spec.endpoint,
                headers=delivery.headers(traceparent, int(timeout_s * 1000)),
                body=delivery.body(),
                timeout_s=timeout_s,
            )
        except pool.ConnectFailed as exc:
            raise AgentUnreachable(f"could not connect to the agent: {exc}") from None
        except pool.RequestTimeout as exc:
            raise AgentTimeout(
                f"no answer within {timeout_s:g} s", outcome_unknown=exc.sent
            ) from None
        except pool.ConnectionLost as exc:
            if not exc.sent:
                raise AgentUnreachable(
                    "the connection closed before the delivery was sent"
                ) from None
            raise AgentFailed(
                "the connection closed before the agent answered", outcome_unknown=True
            ) from None
        except pool.ResponseTooLarge:
            raise AgentFailed(
                "the agent's answer is too large", code="agent_response_too_large"
            ) from None
        except pool.InvalidResponse as exc:
            raise AgentFailed(f"the agent's answer is not valid HTTP: {exc}") from None
        if response.status == HopLimit.status:
            raise HopLimit(
                "an agent down the line ran out of hops (the request is going around in circles)"
            )
        if not 200 <= response.status < 300:
            failure = AgentFailed(
                f"the agent answered HTTP {response.status}",
                http_status=response.status,
                agent_answer=response.body[:ERROR_EXCERPT_BYTES].decode("utf-8", "replace"),
            )
            failure.retryable = _is_retryable(response)  # type: ignore[misc]
            raise failure
        if not response.body:
            return None
        try:
            return orjson.loads(response.body)
        except orjson.JSONDecodeError:
            failure = AgentFailed("the agent's answer is not JSON", code="agent_bad_answer")
            failure.retryable = False  # type: ignore[misc]  # it acted and answered
            raise failure from None

    async def probe(self, spec: TransportSpec, *, timeout_s: float) -> bool:
        try:
            response = await self.client.request(
                "GET", health_url(spec), headers=(), timeout_s=timeout_s
            )
        except pool.PoolError:
            return False
        return 200 <= response.status < 300

    async def aclose(self) -> None:
        await self.client.aclose()
