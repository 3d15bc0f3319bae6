"""The `http` transport: the agent contract of DESIGN.md over one pooled HTTP/1.1 client."""

from __future__ import annotations

from urllib.parse import urlsplit

from agent_reach.errors import (
    AgentFailed,
    AgentTimeout,
    AgentUnreachable,
    HopLimit,
    ValidationFailed,
)
from agent_reach.invoke import pool
from agent_reach.invoke.delivery import Delivery
from agent_reach.invoke.transports.http_body import (
    ACCEPT_ENCODING,
    BadBody,
    BodyTooLarge,
    decode_content,
    shape_result,
)
from agent_reach.invoke.transports.protocol import Shaped
from agent_reach.model.agents import TransportSpec

ERROR_EXCERPT_BYTES = 512  # how much of a failing agent's answer the caller gets to see
REFUSED = "endpoint_not_allowed"  # the endpoint guard's code: one code for every bad endpoint
BAD_ANSWER = "agent_bad_answer"  # the agent acted and answered something unreadable


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


def _acted(message: str, code: str) -> AgentFailed:
    """A failure after the delivery was sent and answered: the agent acted; final."""
    failure = AgentFailed(message, code=code, outcome_unknown=True)
    failure.retryable = False  # type: ignore[misc]
    return failure


def _result(response: pool.Response, limit: int) -> Shaped:
    """A 2xx answer's body as the one result shape; an unreadable one is final."""
    coding = content_type = None
    for name, value in response.headers:
        if name == b"content-encoding":
            coding = value
        elif name == b"content-type":
            content_type = value
    try:
        body = decode_content(coding, response.body, limit)
        return shape_result(content_type, body)
    except BodyTooLarge as exc:
        raise _acted(str(exc), "agent_response_too_large") from None
    except BadBody as exc:
        raise _acted(f"the agent's answer cannot be read: {exc}", BAD_ANSWER) from None


def _is_retryable(response: pool.Response) -> bool:
    """5xx and 429 may succeed elsewhere; 4xx are the request's own fault; an agent may
    say `X-Reach-Retryable: false` to stop any further attempt."""
    for name, value in response.headers:
        if name == b"x-reach-retryable":
            return value.strip().lower() not in (b"false", b"0", b"no")
    return response.status >= 500 or response.status == 429


class HttpTransport:
    """POST the delivery as JSON; a 2xx answer is the result (`http_body` gives it its
    one shape), anything else failed."""

    def __init__(self, client: pool.HttpPool) -> None:
        self.client = client

    def check(self, spec: TransportSpec) -> None:
        check_http_url(spec.endpoint)
        if spec.health_endpoint is not None:
            check_http_url(spec.health_endpoint, "health_endpoint")

    async def deliver(
        self, spec: TransportSpec, delivery: Delivery, *, traceparent: str, timeout_s: float
    ) -> Shaped:
        headers = delivery.headers(traceparent, int(timeout_s * 1000))
        headers.append(("accept-encoding", ACCEPT_ENCODING))
        try:
            response = await self.client.request(
                "POST",
                spec.endpoint,
                headers=headers,
                body=delivery.body(),
                timeout_s=timeout_s,
            )
        except pool.ConnectTimedOut as exc:
            # Under load a full listen backlog drops SYNs: weaker evidence than a refusal.
            raise AgentUnreachable(
                f"could not connect to the agent: {exc}", connect_timeout=True
            ) from None
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
            raise _acted(
                f"the agent's answer is over {self.client.max_response_bytes} bytes",
                "agent_response_too_large",
            ) from None
        except pool.InvalidResponse as exc:
            raise _acted(f"the agent's answer is not valid HTTP: {exc}", BAD_ANSWER) from None
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
        return _result(response, self.client.max_response_bytes)

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
