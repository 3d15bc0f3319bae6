"""Callers' side of the coordinator API: `ReachClient` (async) and `SyncReachClient`.

Both speak the same HTTP API with the same requests and the same parsing; only the
I/O differs. Every non-2xx answer raises the `agent_reach.errors` class the
coordinator rendered, so callers catch by class (`NoCapability`, `AgentTimeout`...).
"""

from __future__ import annotations

import asyncio
import copy
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

import httpx
import orjson
from pydantic import TypeAdapter, ValidationError

from agent_reach.errors import ReachError, TaskPending, error_from_body
from agent_reach.identity.tls import client_context
from agent_reach.model.agents import AgentSpec, InstanceView
from agent_reach.model.decisions import RankedRouteDecision
from agent_reach.model.invocations import InvokeResult, TaskView
from agent_reach.sdk.streams import StreamEvent, read_events, read_events_sync
from agent_reach.sdk.tokens import BearerAuth, TokenProvider

# The `long` timeout class delivers within 30 s; 5 s more covers routing and transfer.
DEFAULT_TIMEOUT_S = 35.0

TASK_POLL_FIRST_S = 0.05  # a task is looked at after 50 ms ...
TASK_POLL_MAX_S = 1.0  # ... then less often, at most every second

T = TypeVar("T")
STREAM_MEDIA_TYPE = "text/event-stream"


def _pending(task: TaskView) -> TaskPending:
    """`TaskPending` for a task still running once `wait_s` passed, saying why."""
    why = "; ".join(
        f"{i.agent_id} ({i.status}): {i.last_error or 'no error recorded'}"
        for i in task.instances or ()
    )
    message = f"task {task.task_id} is still {task.status}" + (f" — {why}" if why else "")
    return TaskPending(message, task=task, task_id=task.task_id)


_INVOKE_RESULT = TypeAdapter(InvokeResult)
_ROUTE_DECISION = TypeAdapter(RankedRouteDecision)
_INSTANCES = TypeAdapter(list[InstanceView])


@dataclass(frozen=True, slots=True)
class _Call(Generic[T]):
    """One API call: what to send, and how to read a 2xx answer's JSON."""

    method: str
    path: str
    parse: Callable[[Any], T]
    body: Any = None


def _invoke_call(payload: Any, **fields: Any) -> _Call[InvokeResult | TaskView]:
    body = _present(**fields)
    body["payload"] = payload
    return _Call("POST", "/v1/invoke", _invoke_answer, body)


def _invoke_answer(body: Any) -> InvokeResult | TaskView:
    """A 200 answer is the result; a 202 (queued or suspended) points to a task."""
    if isinstance(body, dict) and "task_id" in body:
        return TaskView.model_validate(body)
    return _INVOKE_RESULT.validate_python(body)


def _task_call(task_id: str) -> _Call[TaskView]:
    return _Call("GET", f"/v1/tasks/{task_id}", TaskView.model_validate)


def _task_outcome(task: TaskView) -> InvokeResult:
    """A finished task's result, or the error it ended with."""
    if task.http_status == 200:
        return _INVOKE_RESULT.validate_python(task.answer)
    raise error_from_body(task.http_status or 500, task.answer)


def _route_call(
    capability: str | None,
    text: str | None,
    context_id: str | None,
    request_id: str | None,
    top_k: int | None,
) -> _Call[RankedRouteDecision]:
    body = _present(
        capability=capability, text=text, context_id=context_id, request_id=request_id, top_k=top_k
    )
    return _Call("POST", "/v1/route", _ROUTE_DECISION.validate_python, body)


def _register_call(spec: AgentSpec | dict[str, Any]) -> _Call[InstanceView]:
    body = spec.model_dump(mode="json") if isinstance(spec, AgentSpec) else spec
    return _Call("POST", "/v1/agents", InstanceView.model_validate, body)


def _heartbeat_call(agent_id: str) -> _Call[float]:
    return _Call("POST", f"/v1/agents/{agent_id}/heartbeat", lambda body: float(body["ttl"]))


def _deregister_call(agent_id: str) -> _Call[None]:
    return _Call("DELETE", f"/v1/agents/{agent_id}", lambda _: None)


def _agents_call() -> _Call[list[InstanceView]]:
    return _Call("GET", "/v1/agents", lambda body: _INSTANCES.validate_python(body["agents"]))


def _capabilities_call() -> _Call[dict[str, list[str]]]:
    return _Call("GET", "/v1/capabilities", lambda body: dict(body["capabilities"]))


def _present(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


def _parse(call: _Call[T], response: httpx.Response) -> T:
    """The call's value from a 2xx answer; the matching `ReachError` from anything else."""
    try:
        body = orjson.loads(response.content) if response.content else None
    except orjson.JSONDecodeError:
        body = None
    if not response.is_success:
        raise error_from_body(response.status_code, body)
    try:
        return call.parse(body)
    except (ValidationError, KeyError, TypeError) as exc:
        raise ReachError(
            f"{call.method} {call.path}: the coordinator's answer has an unexpected shape",
            code="unexpected_answer",
        ) from exc


def _unreachable(base_url: str, exc: httpx.TransportError) -> ReachError:
    return ReachError(
        f"could not reach the coordinator at {base_url}: {str(exc) or type(exc).__name__}",
        code="coordinator_unreachable",
    )


def _is_stream(response: httpx.Response) -> bool:
    content_type = response.headers.get("content-type", "")
    return response.is_success and content_type.startswith(STREAM_MEDIA_TYPE)


def _not_a_stream(call: _Call[Any], response: httpx.Response) -> None:
    """An answer to a stream request that is not one: its error, else unexpected."""
    answer = _parse(call, response)
    raise ReachError(f"expected a stream, got {type(answer).__name__}", code="unexpected_answer")


def coordinator_tls(
    ca_file: str | Path | None, client_cert: str | Path | None, client_key: str | Path | None
) -> ssl.SSLContext | bool:
    """How a client verifies an https coordinator: the system's CAs (True) unless a CA
    file or a client certificate asks for a context of its own."""
    if ca_file is None and client_cert is None:
        return True
    return client_context(
        None if ca_file is None else Path(ca_file),
        None if client_cert is None else Path(client_cert),
        None if client_key is None else Path(client_key),
        names=("ca_file", "client_cert", "client_key"),
    )


class _ClientCore:
    """What both clients share: the coordinator URL, the headers every call carries and
    the token provider's authentication (instead of an API key)."""

    def __init__(
        self, base_url: str, *, api_key: str | None, token_provider: TokenProvider | None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers: dict[str, str] = {}
        self._owns_connections = True
        if api_key is not None and token_provider is not None:
            raise ValueError("give api_key or token_provider, not both")
        if api_key is not None:
            self._headers["authorization"] = f"Bearer {api_key}"
        self._auth = None if token_provider is None else BearerAuth(token_provider)
        self._request_auth: Any = httpx.USE_CLIENT_DEFAULT

    def for_handler(self, *, hop: int, traceparent: str | None) -> Self:
        """A client on the same connections that passes a handler's hop budget and trace on.

        Calls made through it carry `X-Reach-Hop: hop` (the budget the delivery left)
        and the delivery's `traceparent`, so the coordinator counts the hop and keeps
        the trace. Closing it does not close the connections it shares.
        """
        bound = copy.copy(self)
        bound._headers = {**self._headers, "x-reach-hop": str(hop)}
        if traceparent:
            bound._headers["traceparent"] = traceparent
        bound._owns_connections = False
        return bound

    def with_delegation(self, token: str) -> Self:
        """A client on the same connections whose only credential is a delegation
        token: its calls act on behalf of the token's caller (docs/mesh.md)."""
        bound = copy.copy(self)
        bound._headers = {**self._headers, "authorization": f"Bearer {token}"}
        bound._request_auth = None  # the token provider's own token must not replace it
        bound._owns_connections = False
        return bound


class ReachClient(_ClientCore):
    """Async client of one coordinator, with pooled keep-alive connections.

    Use it as ``async with ReachClient(url) as client: ...`` or call `aclose`.
    Raises the `agent_reach.errors` class of any error answer, and `ReachError` with
    code `coordinator_unreachable` when the coordinator cannot be reached at all.
    Credentials: an `api_key`, or a `token_provider` (a callable returning an IdP
    token, sync or async, or `ClientCredentials`; see `agent_reach.sdk.tokens`).
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        token_provider: TokenProvider | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        ca_file: str | Path | None = None,
        client_cert: str | Path | None = None,
        client_key: str | Path | None = None,
    ) -> None:
        """`ca_file`: PEM CA(s) an https coordinator's certificate is verified against,
        beside the system's; `client_cert` and `client_key`: presented to a coordinator
        that asks for a client certificate (the credential where its policy maps it)."""
        super().__init__(base_url, api_key=api_key, token_provider=token_provider)
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=timeout_s,
            auth=self._auth,
            verify=coordinator_tls(ca_file, client_cert, client_key),
        )

    async def invoke(
        self,
        capability: str | None = None,
        *,
        text: str | None = None,
        payload: Any = None,
        wait_s: float | None = DEFAULT_TIMEOUT_S,
        **options: Any,
    ) -> InvokeResult:
        """Route and deliver; the agent's answer is `result.result`.

        `options` are the other fields of the invoke body (`context_id`, `request_id`,
        `max_hop`, `budget`, `timeout_class`, `suspend`, `on_duplicate`; docs/api.md).
        When the coordinator answers with a task (suspended or long requests), this
        waits up to `wait_s` for it to finish (`wait_s=None` waits without limit); a
        task still running then raises `TaskPending` with its id, to poll later with `wait_task`.
        """
        answer = await self._send(
            _invoke_call(payload, capability=capability, text=text, **options)
        )
        if isinstance(answer, TaskView):
            return await self.wait_task(answer.task_id, wait_s)
        return answer

    async def invoke_stream(
        self,
        capability: str | None = None,
        *,
        text: str | None = None,
        payload: Any = None,
        **options: Any,
    ) -> AsyncIterator[StreamEvent]:
        """Route and deliver, asking for a stream: each event as the agent sends it, then
        the last one (`reach.end`) with the whole answer in `answer`.

        An agent that does not stream gives that last event only. An error before the
        stream began, or one that ended it (`reach.error`: the deadline passed, the agent
        broke off), raises its `agent_reach.errors` class. Leaving the iteration early
        closes the connection: the coordinator stops the agent's stream.
        """
        call = _invoke_call(payload, capability=capability, text=text, **options)
        headers = {**self._headers, "accept": STREAM_MEDIA_TYPE}
        try:
            async with self._http.stream(
                "POST", call.path, json=call.body, headers=headers, auth=self._request_auth
            ) as r:
                if not _is_stream(r):
                    await r.aread()
                    _not_a_stream(call, r)
                async for event in read_events(r.aiter_lines()):
                    yield event
        except httpx.TransportError as exc:
            raise _unreachable(self.base_url, exc) from None

    async def submit(
        self,
        capability: str | None = None,
        *,
        text: str | None = None,
        payload: Any = None,
        **options: Any,
    ) -> TaskView:
        """Start an asynchronous invocation (`mode: async`); poll it with `task`/`wait_task`."""
        answer = await self._send(
            _invoke_call(payload, capability=capability, text=text, mode="async", **options)
        )
        if not isinstance(answer, TaskView):
            raise ReachError(
                "expected a task for an asynchronous request", code="unexpected_answer"
            )
        return answer

    async def task(self, task_id: str) -> TaskView:
        """The task's status, and its answer once finished."""
        return await self._send(_task_call(task_id))

    async def wait_task(
        self, task_id: str, wait_s: float | None = DEFAULT_TIMEOUT_S
    ) -> InvokeResult:
        """Poll until the task finishes: its result, or the error it ended with."""
        deadline = None if wait_s is None else time.monotonic() + wait_s
        pause = TASK_POLL_FIRST_S
        while not (task := await self.task(task_id)).is_finished:
            if deadline is not None and time.monotonic() + pause > deadline:
                raise _pending(task)
            await asyncio.sleep(pause)
            pause = min(TASK_POLL_MAX_S, pause * 2)
        return _task_outcome(task)

    async def route(
        self,
        capability: str | None = None,
        *,
        text: str | None = None,
        context_id: str | None = None,
        request_id: str | None = None,
        top_k: int | None = None,
    ) -> RankedRouteDecision:
        """The explained routing decision; nothing is invoked. For `text`, its `ranked`
        lists the `top_k` capabilities (1-50; the coordinator's default: 3) the caller
        may invoke that fit the text best, best first, whether or not it would route;
        None when the request names its capability."""
        return await self._send(_route_call(capability, text, context_id, request_id, top_k))

    async def register(self, spec: AgentSpec | dict[str, Any]) -> InstanceView:
        """Register (or re-register) an instance; its lease starts now."""
        return await self._send(_register_call(spec))

    async def heartbeat(self, agent_id: str) -> float:
        """Renew the lease and return its ttl; `NotFound` (`unknown_agent`) means register again."""
        return await self._send(_heartbeat_call(agent_id))

    async def deregister(self, agent_id: str) -> None:
        """Take the instance out of the pool at once."""
        await self._send(_deregister_call(agent_id))

    async def agents(self) -> list[InstanceView]:
        """Every known instance with its status, load, success rate and latency."""
        return await self._send(_agents_call())

    async def capabilities(self) -> dict[str, list[str]]:
        """Capability -> ids of its live instances."""
        return await self._send(_capabilities_call())

    async def aclose(self) -> None:
        if self._owns_connections:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _send(self, call: _Call[T]) -> T:
        try:
            response = await self._http.request(
                call.method,
                call.path,
                json=call.body,
                headers=self._headers,
                auth=self._request_auth,
            )
        except httpx.TransportError as exc:
            raise _unreachable(self.base_url, exc) from None
        return _parse(call, response)


class SyncReachClient(_ClientCore):
    """Blocking twin of `ReachClient`: the same methods, answers and errors (a callable
    `token_provider` must be a plain function here)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        token_provider: TokenProvider | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        ca_file: str | Path | None = None,
        client_cert: str | Path | None = None,
        client_key: str | Path | None = None,
    ) -> None:
        super().__init__(base_url, api_key=api_key, token_provider=token_provider)
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=timeout_s,
            auth=self._auth,
            verify=coordinator_tls(ca_file, client_cert, client_key),
        )

    def invoke(
        self,
        capability: str | None = None,
        *,
        text: str | None = None,
        payload: Any = None,
        wait_s: float | None = DEFAULT_TIMEOUT_S,
        **options: Any,
    ) -> InvokeResult:
        """Route and deliver; see `ReachClient.invoke`."""
        answer = self._send(_invoke_call(payload, capability=capability, text=text, **options))
        if isinstance(answer, TaskView):
            return self.wait_task(answer.task_id, wait_s)
        return answer

    def invoke_stream(
        self,
        capability: str | None = None,
        *,
        text: str | None = None,
        payload: Any = None,
        **options: Any,
    ) -> Iterator[StreamEvent]:
        """`ReachClient.invoke_stream`, blocking: the same events, last event and errors."""
        call = _invoke_call(payload, capability=capability, text=text, **options)
        headers = {**self._headers, "accept": STREAM_MEDIA_TYPE}
        try:
            with self._http.stream(
                "POST", call.path, json=call.body, headers=headers, auth=self._request_auth
            ) as r:
                if not _is_stream(r):
                    r.read()
                    _not_a_stream(call, r)
                yield from read_events_sync(r.iter_lines())
        except httpx.TransportError as exc:
            raise _unreachable(self.base_url, exc) from None

    def submit(
        self,
        capability: str | None = None,
        *,
        text: str | None = None,
        payload: Any = None,
        **options: Any,
    ) -> TaskView:
        """Start an asynchronous invocation (`mode: async`); poll it with `task`/`wait_task`."""
        answer = self._send(
            _invoke_call(payload, capability=capability, text=text, mode="async", **options)
        )
        if not isinstance(answer, TaskView):
            raise ReachError(
                "expected a task for an asynchronous request", code="unexpected_answer"
            )
        return answer

    def task(self, task_id: str) -> TaskView:
        """The task's status, and its answer once finished."""
        return self._send(_task_call(task_id))

    def wait_task(self, task_id: str, wait_s: float | None = DEFAULT_TIMEOUT_S) -> InvokeResult:
        """Poll until the task finishes: its result, or the error it ended with."""
        deadline = None if wait_s is None else time.monotonic() + wait_s
        pause = TASK_POLL_FIRST_S
        while not (task := self.task(task_id)).is_finished:
            if deadline is not None and time.monotonic() + pause > deadline:
                raise _pending(task)
            time.sleep(pause)
            pause = min(TASK_POLL_MAX_S, pause * 2)
        return _task_outcome(task)

    def route(
        self,
        capability: str | None = None,
        *,
        text: str | None = None,
        context_id: str | None = None,
        request_id: str | None = None,
        top_k: int | None = None,
    ) -> RankedRouteDecision:
        """The explained routing decision; nothing is invoked. For `text`, its `ranked`
        lists the `top_k` capabilities (1-50; the coordinator's default: 3) the caller
        may invoke that fit the text best, best first, whether or not it would route;
        None when the request names its capability."""
        return self._send(_route_call(capability, text, context_id, request_id, top_k))

    def register(self, spec: AgentSpec | dict[str, Any]) -> InstanceView:
        """Register (or re-register) an instance; its lease starts now."""
        return self._send(_register_call(spec))

    def heartbeat(self, agent_id: str) -> float:
        """Renew the lease and return its ttl; `NotFound` (`unknown_agent`) means register again."""
        return self._send(_heartbeat_call(agent_id))

    def deregister(self, agent_id: str) -> None:
        """Take the instance out of the pool at once."""
        self._send(_deregister_call(agent_id))

    def agents(self) -> list[InstanceView]:
        """Every known instance with its status, load, success rate and latency."""
        return self._send(_agents_call())

    def capabilities(self) -> dict[str, list[str]]:
        """Capability -> ids of its live instances."""
        return self._send(_capabilities_call())

    def close(self) -> None:
        if self._owns_connections:
            self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _send(self, call: _Call[T]) -> T:
        try:
            response = self._http.request(
                call.method,
                call.path,
                json=call.body,
                headers=self._headers,
                auth=self._request_auth,
            )
        except httpx.TransportError as exc:
            raise _unreachable(self.base_url, exc) from None
        return _parse(call, response)
