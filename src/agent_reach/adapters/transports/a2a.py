"""The `a2a` transport: an Agent2Agent agent (v1.0 or v0.3) as the instance of its skills.

At registration the card is read (size-limited, through the endpoint guard) and the
interface it prefers among those we speak is stored with the registration: its URL,
version and binding (`adapters/a2a_cards.py`). A delivery is one message send —
JSON-RPC `SendMessage` with `A2A-Version: 1.0` (v0.3 `message/send`), or on the HTTP+JSON
binding `POST <url>/message:send` — and a returned Task is polled (`GetTask`, `GET
<url>/tasks/<id>`) until it ends or the attempt's time runs out. A caller who asks for a
stream, delivered to an agent whose card says `capabilities.streaming`, gets the agent's
`SendStreamingMessage` / `message/stream` (`<url>/message:stream`) events as they come.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

import orjson

from agent_reach.adapters import a2a_messages as msgs
from agent_reach.adapters.a2a_cards import MAX_CARD_BYTES, AgentCard, card_urls, parse_card
from agent_reach.adapters.a2a_stream import A2AEvents, as_rpc, refusal, whole_answer
from agent_reach.errors import AgentFailed, AgentTimeout, AgentUnreachable, ValidationFailed
from agent_reach.model.agents import AgentSpec, SkillSpec, TransportSpec
from agent_reach.model.delivery import Delivery
from agent_reach.wire import pool
from agent_reach.wire.event_stream import EventStream
from agent_reach.wire.pool_stream import open_stream
from agent_reach.wire.sse import is_event_stream
from agent_reach.wire.urls import check_http_url

CARD_TIMEOUT_S = 5.0  # a card is one small static document
POLL_FIRST_S = 0.05  # GetTask backoff: 50 ms doubling up to 1 s
POLL_MAX_S = 1.0
VERSION_HEADER = "a2a-version"  # the v1.0 SDK server refuses a v1.0 call without it
CheckUrl = Callable[[str, str], Awaitable[None]]


class A2ATransport:
    """Deliveries as A2A message sends over the pooled client."""

    def __init__(self, client: pool.HttpPool) -> None:
        self.client = client

    def check(self, spec: TransportSpec) -> None:
        check_http_url(spec.endpoint)
        extra = spec.model_extra or {}
        for name in ("rpc_url", "card_url"):
            if name in extra:
                check_http_url(str(extra[name]), f"transport.{name}")

    async def complete(self, spec: AgentSpec, check_url: CheckUrl) -> AgentSpec:
        """The registration with what the card says: capabilities (when omitted), skills'
        text for routing, and the card's JSON-RPC endpoint and version."""
        card_url, card = await self._read_card(spec.transport.endpoint)
        await check_url(card.rpc_url, "transport.rpc_url")
        skills: dict[str, SkillSpec] = {}
        for skill in card.skills:
            # The skill's text routes to its id; its tags match by their own word only, so
            # text routing does not see one skill as several equally good capabilities.
            first, *tags = skill.capabilities
            skills.setdefault(
                first,
                SkillSpec(capability=first, description=skill.description, examples=skill.examples),
            )
            for tag in tags:
                skills.setdefault(tag, SkillSpec(capability=tag))
        capabilities = spec.capabilities or list(skills)
        transport = {
            **spec.transport.model_dump(),
            "card_url": card_url,
            "rpc_url": card.rpc_url,
            "a2a_version": card.version,
            "a2a_streaming": card.streaming,
            "a2a_binding": card.binding,
        }
        body = {
            **spec.model_dump(),
            "capabilities": capabilities,
            "display_name": spec.display_name or card.name,
            "idempotent": spec.idempotent or card.idempotent,
            "safe": spec.safe or card.safe,
            "description": spec.description or card.description,
            "skills": spec.skills or [s for tag, s in skills.items() if tag in capabilities],
            "transport": transport,
        }
        return AgentSpec.model_validate(body)

    async def _read_card(self, endpoint: str) -> tuple[str, AgentCard]:
        last = "no card found"
        for url in card_urls(endpoint):
            try:
                response = await self.client.request("GET", url, timeout_s=CARD_TIMEOUT_S)
            except pool.PoolError as exc:
                raise ValidationFailed(
                    f"the agent card at {url} could not be read: {exc}",
                    code="agent_card_unreachable",
                    field="transport.endpoint",
                ) from None
            if response.status == 404:
                last = f"{url} answered 404"
                continue
            if len(response.body) > MAX_CARD_BYTES:
                raise ValidationFailed(
                    f"the agent card is larger than {MAX_CARD_BYTES} bytes",
                    code="agent_card_too_large",
                    field="transport.endpoint",
                )
            if not 200 <= response.status < 300:
                last = f"{url} answered HTTP {response.status}"
                continue
            try:
                return url, parse_card(orjson.loads(response.body))
            except orjson.JSONDecodeError:
                last = f"{url} is not JSON"
        raise ValidationFailed(
            f"no A2A agent card: {last}", code="invalid_agent_card", field="transport.endpoint"
        )

    async def deliver(
        self, spec: TransportSpec, delivery: Delivery, *, traceparent: str, timeout_s: float
    ) -> Any:
        extra = spec.model_extra or {}
        version, rpc_url = extra["a2a_version"], str(extra["rpc_url"])
        rest = extra.get("a2a_binding") == "HTTP+JSON"
        deadline = asyncio.get_running_loop().time() + timeout_s
        metadata = {"capability": delivery.capability, "request_id": delivery.request_id}
        message = msgs.message(
            version, delivery.request_id, delivery.text, delivery.payload, metadata
        )
        params: dict[str, Any] = {"message": message}
        if version == "0.3":
            params["configuration"] = {"blocking": True}
        headers = [("x-request-id", delivery.request_id), ("traceparent", traceparent)]
        if version == "1.0":
            headers.append((VERSION_HEADER, "1.0"))
        if delivery.stream and extra.get("a2a_streaming") is True:
            return await self._stream(rpc_url, version, params, headers, timeout_s, rest=rest)
        result = await self._call(
            rpc_url, msgs.SEND[version], params, headers, deadline, sent_before=False, rest=rest
        )
        kind, answer = msgs.split_answer(result)
        if kind == "message":
            return msgs.parts_of(answer.get("parts"))
        if kind != "task":
            raise _bad_answer("the agent's answer is neither a Message nor a Task")
        return await self._finish(rpc_url, version, answer, headers, deadline, rest=rest)

    async def _stream(
        self,
        rpc_url: str,
        version: str,
        params: dict[str, Any],
        headers: list[tuple[str, str]],
        timeout_s: float,
        *,
        rest: bool,
    ) -> Any:
        """`SendStreamingMessage` / `message/stream`: the agent's events, translated
        (`adapters/a2a_stream.py`), as they come; `timeout_s` covers the whole stream."""
        if rest:
            url, body = rpc_url.rstrip("/") + "/message:stream", orjson.dumps(params)
        else:
            url, body = (
                rpc_url,
                orjson.dumps(
                    {"jsonrpc": "2.0", "id": 1, "method": msgs.STREAM[version], "params": params}
                ),
            )
        try:
            streamed = await open_stream(
                self.client,
                "POST",
                url,
                headers=[
                    ("content-type", "application/json"),
                    ("accept", "text/event-stream"),
                    *headers,
                ],
                body=body,
                timeout_s=timeout_s,
            )
            content_type = streamed.header(b"content-type")
            if 200 <= streamed.status < 300 and is_event_stream(content_type):
                return EventStream(streamed, timeout_s, translate=A2AEvents(rest=rest).translate)
            raw = await streamed.read_all()
        except pool.ConnectFailed as exc:
            raise AgentUnreachable(f"could not connect to the A2A agent: {exc}") from None
        except pool.RequestTimeout:
            raise AgentTimeout(f"no answer within {timeout_s:g} s", outcome_unknown=True) from None
        except pool.PoolError as exc:
            raise AgentFailed(
                f"the A2A agent's stream failed: {exc}", outcome_unknown=True
            ) from None
        if rest:
            _refuse_rest(streamed.status, raw)
        if not 200 <= streamed.status < 300:
            failure = AgentFailed(
                f"the A2A agent answered HTTP {streamed.status}",
                http_status=streamed.status,
                agent_answer=raw[:512].decode("utf-8", "replace"),
                retryable=streamed.status >= 500 or streamed.status == 429,
            )
            raise failure
        # A whole JSON-RPC answer (an error up front, or a server that does not stream).
        try:
            answer = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise _bad_answer("the A2A agent's answer is not JSON") from None
        return whole_answer(as_rpc(answer) if rest else answer)

    async def _finish(
        self,
        rpc_url: str,
        version: str,
        task: dict[str, Any],
        headers: list[tuple[str, str]],
        deadline: float,
        *,
        rest: bool,
    ) -> Any:
        """Poll the task until it ends; its artifacts are the result."""
        wait_s = POLL_FIRST_S
        loop = asyncio.get_running_loop()
        while True:
            state = msgs.task_state(task)
            if state in msgs.COMPLETED:
                return msgs.task_result(task)
            if state in msgs.FAILED or state in msgs.STUCK:
                raise AgentFailed(  # the agent decided: final
                    f"the A2A task ended {state}",
                    code="a2a_task_failed",
                    retryable=False,
                    task_state=state,
                    agent_answer=msgs.task_result(task),
                )
            left_s = deadline - loop.time()
            if left_s <= wait_s:
                raise AgentTimeout(
                    f"the A2A task was still {state or 'running'} when time ran out",
                    outcome_unknown=True,
                    task_id=task.get("id"),
                )
            await asyncio.sleep(wait_s)
            wait_s = min(wait_s * 2, POLL_MAX_S)
            result = await self._call(
                rpc_url,
                msgs.GET_TASK[version],
                {"id": task.get("id")},
                headers,
                deadline,
                sent_before=True,
                rest=rest,
            )
            task = result if isinstance(result, dict) else {}

    async def _call(
        self,
        url: str,
        method: str,
        params: dict[str, Any],
        headers: list[tuple[str, str]],
        deadline: float,
        *,
        sent_before: bool,
        rest: bool,
    ) -> Any:
        """One JSON-RPC call, or its HTTP+JSON request (`rest`); after the send
        (`sent_before`) every failure may have acted."""
        if rest:
            http_method, url, body = _rest_request(url, method, params)
        else:
            http_method = "POST"
            body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        timeout_s = max(0.001, deadline - asyncio.get_running_loop().time())
        try:
            response = await self.client.request(
                http_method,
                url,
                headers=[("content-type", "application/json"), *headers],
                body=body,
                timeout_s=timeout_s,
            )
        except pool.ConnectFailed as exc:
            if not sent_before:
                raise AgentUnreachable(f"could not connect to the A2A agent: {exc}") from None
            raise AgentFailed(f"lost the A2A agent: {exc}", outcome_unknown=True) from None
        except pool.RequestTimeout as exc:
            raise AgentTimeout(
                f"no answer within {timeout_s:g} s", outcome_unknown=exc.sent or sent_before
            ) from None
        except pool.ConnectionLost as exc:
            if not (exc.sent or sent_before):
                raise AgentUnreachable("the connection closed before the send") from None
            raise AgentFailed(
                "the connection closed before the A2A agent answered", outcome_unknown=True
            ) from None
        except pool.PoolError as exc:
            raise AgentFailed(f"the A2A agent's answer is unreadable: {exc}") from None
        if rest:
            _refuse_rest(response.status, response.body)
        if not 200 <= response.status < 300:
            failure = AgentFailed(
                f"the A2A agent answered HTTP {response.status}",
                http_status=response.status,
                agent_answer=response.body[:512].decode("utf-8", "replace"),
                retryable=not sent_before and (response.status >= 500 or response.status == 429),
            )
            raise failure
        try:
            answer = orjson.loads(response.body)
        except orjson.JSONDecodeError:
            raise _bad_answer("the A2A agent's answer is not JSON") from None
        if rest:
            return answer
        if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
            raise refusal(answer["error"])
        return answer.get("result") if isinstance(answer, dict) else None

    async def probe(self, spec: TransportSpec, *, timeout_s: float) -> bool:
        url = str((spec.model_extra or {}).get("card_url") or card_urls(spec.endpoint)[0])
        return await self.client.probe(url, timeout_s=timeout_s)

    async def aclose(self) -> None:
        """Nothing of its own: the pooled client belongs to the `http` transport."""


def _rest_request(base: str, method: str, params: dict[str, Any]) -> tuple[str, str, bytes]:
    """(HTTP method, URL, body) of a v1.0 call on the HTTP+JSON binding."""
    base = base.rstrip("/")
    if method == msgs.GET_TASK["1.0"]:
        return "GET", f"{base}/tasks/{quote(str(params.get('id')), safe='')}", b""
    return "POST", f"{base}/message:send", orjson.dumps(params)


def _refuse_rest(status: int, raw: bytes) -> None:
    """An HTTP+JSON error answer with a `google.rpc.Status` body is the agent's own answer,
    as a JSON-RPC error is: a refusal, never retried (its A2A reason, e.g. `TASK_NOT_FOUND`,
    as the error's code; a 5xx may have acted). 429 and 503 (busy: it did nothing) and
    any other answer are left to the ordinary HTTP handling."""
    if status < 400 or status in (429, 503):
        return
    try:
        error = orjson.loads(raw).get("error")
    except (orjson.JSONDecodeError, AttributeError):
        return
    if not isinstance(error, dict):
        return
    details: list[Any] = error.get("details") or []
    reason = next(
        (d.get("reason") for d in list(details) if isinstance(d, dict) and d.get("reason")),
        None,
    )
    error = {"code": reason or error.get("code"), "message": error.get("message", "")}
    raise refusal(error, outcome_unknown=status >= 500)


def _bad_answer(message: str) -> AgentFailed:
    return AgentFailed(message, code="agent_bad_answer", retryable=False)  # it acted, answered
