"""The `http` transport: the agent contract (docs/agent-contract.md) over one pooled
HTTP/1.1 client.

A delivery whose caller asked for a stream goes on a connection of its own and may come
back as an `EventStream` (`wire/event_stream.py`); every other one is one pooled exchange.
"""

from __future__ import annotations

import dataclasses
import math

from agent_reach.errors import (
    AgentFailed,
    HopLimit,
)
from agent_reach.model.agents import TransportSpec
from agent_reach.model.delivery import Delivery
from agent_reach.wire import pool
from agent_reach.wire.event_stream import EventStream
from agent_reach.wire.failures import Peer, delivery_failure
from agent_reach.wire.http_body import (
    ACCEPT_ENCODING,
    BadBody,
    BodyTooLarge,
    Shaped,
    decode_content,
    failure_answer,
    shape_result,
)
from agent_reach.wire.pool_stream import open_stream
from agent_reach.wire.sse import MEDIA_TYPE, is_event_stream
from agent_reach.wire.urls import check_endpoints, health_url

BAD_ANSWER = "agent_bad_answer"  # the agent acted and answered something unreadable
STREAM_ACCEPT = f"{MEDIA_TYPE}, application/json;q=0.9"  # a streaming caller's delivery
_ACCEPT_ENCODING_LINE = f"accept-encoding: {ACCEPT_ENCODING}\r\n".encode()
AGENT = Peer("the agent", sent="delivery")


def _acted(message: str, code: str) -> AgentFailed:
    """A failure after the delivery was sent and answered: the agent acted; final."""
    return AgentFailed(message, code=code, retryable=False, outcome_unknown=True)


def _result(response: pool.Response, limit: int) -> Shaped:
    """A 2xx answer's body as the one result shape; an unreadable one is final."""
    coding = content_type = reported = None
    for name, value in response.headers:
        if name == b"content-encoding":
            coding = value
        elif name == b"content-type":
            content_type = value
        elif name == b"x-reach-cost":
            reported = value
    try:
        body = decode_content(coding, response.body, limit)
        shaped = shape_result(content_type, body)
        if reported is not None:
            shaped = dataclasses.replace(shaped, cost=_reported_cost(reported))
        return shaped
    except BodyTooLarge as exc:
        raise _acted(str(exc), "agent_response_too_large") from None
    except BadBody as exc:
        raise _acted(f"the agent's answer cannot be read: {exc}", BAD_ANSWER) from None


def _reported_cost(value: bytes) -> float | None:
    """`X-Reach-Cost: <number>` (docs/agent-contract.md): a finite number >= 0, else
    ignored (an agent cannot earn budget back with a negative cost)."""
    try:
        cost = float(value.strip())
    except ValueError:
        return None
    return cost if math.isfinite(cost) and cost >= 0 else None


def _headers(delivery: Delivery, traceparent: str, deadline_ms: int) -> list[tuple[str, str]]:
    headers = delivery.headers(traceparent, deadline_ms)
    headers.append(("accept-encoding", ACCEPT_ENCODING))
    return headers


def _check_status(response: pool.Response) -> None:
    """A non-2xx answer is a failed attempt (508 from down the line is the hop limit)."""
    if response.status == HopLimit.status:
        raise HopLimit(
            "an agent down the line ran out of hops (the request is going around in circles)"
        )
    if not 200 <= response.status < 300:
        failure = AgentFailed(
            f"the agent answered HTTP {response.status}",
            http_status=response.status,
            agent_answer=failure_answer(response.body),
            retryable=_is_retryable(response),
        )
        raise failure


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
        check_endpoints(spec)

    async def deliver(
        self, spec: TransportSpec, delivery: Delivery, *, traceparent: str, timeout_s: float
    ) -> Shaped | EventStream:
        """The result; an `EventStream` when the delivery asks for a stream and the agent
        answers `text/event-stream` (then `timeout_s` covers the whole stream)."""
        deadline_ms = int(timeout_s * 1000)
        encoded = (
            None
            if delivery.stream
            else delivery.encoded_headers(traceparent, deadline_ms, _ACCEPT_ENCODING_LINE)
        )
        headers: list[tuple[str, str]] = []
        if encoded is None:  # checked by the pool, header by header
            headers = _headers(delivery, traceparent, deadline_ms)
            if delivery.stream:
                return await self._deliver_streamed(spec, delivery, headers, timeout_s)
        try:
            response = await self.client.request(
                "POST",
                spec.endpoint,
                headers=headers,
                body=delivery.body(),
                timeout_s=timeout_s,
                encoded=b"" if encoded is None else encoded,
            )
        except pool.PoolError as exc:
            raise delivery_failure(exc, timeout_s, AGENT, self._unreadable) from None
        if not 200 <= response.status < 300:  # a 2xx is no failure: no call to say so
            _check_status(response)
        return _result(response, self.client.max_response_bytes)

    async def _deliver_streamed(
        self,
        spec: TransportSpec,
        delivery: Delivery,
        headers: list[tuple[str, str]],
        timeout_s: float,
    ) -> Shaped | EventStream:
        """On a connection of its own, read as it arrives (`pool_stream`)."""
        headers.append(("accept", STREAM_ACCEPT))
        try:
            streamed = await open_stream(
                self.client,
                "POST",
                spec.endpoint,
                headers=headers,
                body=delivery.body(),
                timeout_s=timeout_s,
            )
            content_type = streamed.header(b"content-type")
            if 200 <= streamed.status < 300 and is_event_stream(content_type):
                if streamed.header(b"content-encoding") not in (None, b"identity"):
                    streamed.close()
                    raise _acted("the agent's event stream is compressed", BAD_ANSWER)
                return EventStream(streamed, timeout_s)
            body = await streamed.read_all()
        except pool.PoolError as exc:
            raise delivery_failure(exc, timeout_s, AGENT, self._unreadable) from None
        response = pool.Response(streamed.status, streamed.headers, body)
        if not 200 <= response.status < 300:  # a 2xx is no failure: no call to say so
            _check_status(response)
        return _result(response, self.client.max_response_bytes)

    def _unreadable(self, exc: pool.ResponseTooLarge | pool.InvalidResponse) -> AgentFailed:
        """A pool error saying the agent answered something this cannot read: it acted."""
        if isinstance(exc, pool.ResponseTooLarge):
            return _acted(
                f"the agent's answer is over {self.client.max_response_bytes} bytes",
                "agent_response_too_large",
            )
        return _acted(f"the agent's answer is not valid HTTP: {exc}", BAD_ANSWER)

    async def probe(self, spec: TransportSpec, *, timeout_s: float) -> bool:
        return await self.client.probe(health_url(spec), timeout_s=timeout_s)

    async def aclose(self) -> None:
        await self.client.aclose()
