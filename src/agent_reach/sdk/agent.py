"""Agent authors' side: an HTTP agent that registers itself, keeps its lease and runs handlers.

    agent = Agent("inventory-01", ["inventory.check"], coordinator_url="http://127.0.0.1:8500")

    @agent.handler
    async def check(request: AgentRequest) -> dict:
        return {"sku": request.payload["sku"], "in_stock": True}

    agent.serve(port=9040)

A handler that is an async generator streams its answer, one event per `yield`
(`sdk/agent_stream.py`). `agent.app` is a plain ASGI app implementing the agent contract
(docs/agent-contract.md), so it can also run under any ASGI server or in a test thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import random
import socket
import ssl
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import httpx
import orjson
import structlog
import uvicorn
from pydantic import TypeAdapter, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from agent_reach.errors import CallerError, InvalidRequest, NotFound, ReachError, error_from_body
from agent_reach.identity.tls import TlsSettingError, server_context
from agent_reach.model.agents import (
    DEFAULT_TTL_S,
    AgentSpec,
    SkillSpec,
    TransportSpec,
    normalize_capability,
)
from agent_reach.model.delivery import Delivery
from agent_reach.model.invocations import InvokeResult
from agent_reach.model.offers import NegotiateSpec, OfferAnswer, OfferRequest
from agent_reach.sdk.agent_stream import LiveStream
from agent_reach.sdk.client import ReachClient, coordinator_tls
from agent_reach.sdk.tokens import TokenProvider
from agent_reach.wire.json_answers import dump_json, json_response
from agent_reach.wire.sse import MEDIA_TYPE

_rng = random.Random()  # our own: callers seeding `random` do not steer backoff

log = structlog.get_logger("agent_reach.sdk")

# Results kept for repeated deliveries: at 100 requests/s that covers the last 100 s,
# longer than the coordinator's whole retry schedule (1 s, 2 s, 4 s).
REMEMBERED_REQUESTS = 10_000
HEARTBEATS_PER_TTL = 3  # renew at ttl/3, so two lost heartbeats do not lose the lease
REGISTER_BACKOFF_FIRST_S = 0.1
REGISTER_BACKOFF_MAX_S = 5.0
BACKLOG = 2048  # uvicorn's default listen backlog
# A context call is one store read or write on the coordinator (milliseconds); after 5 s,
# the longest synchronous timeout class (`reasoning`), the delivery has failed anyway.
CONTEXT_TIMEOUT_S = 5.0
MERGE_PATCH = "application/merge-patch+json"  # RFC 7386, section 4
_WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})  # noqa: S104 - recognised, never bound here
_DELIVERY = TypeAdapter(Delivery)

HandlerT = TypeVar("HandlerT", bound=Callable[..., Any])
# An offer function's answer: an `OfferAnswer`, its JSON form, or just accept (True/False).
OfferResult = OfferAnswer | dict[str, Any] | bool
OfferFn = Callable[[OfferRequest], OfferResult | Awaitable[OfferResult]]
_OFFER_REQUEST = TypeAdapter(OfferRequest)


class RetryLater(Exception):
    """Raise from a handler to have the coordinator try another instance (answers 503).

    Any other exception answers 500 with `X-Reach-Retryable: false`: a crash in the
    handler would crash on every instance, so the caller gets the error at once.
    """


@dataclass(frozen=True, slots=True)
class AgentRequest:
    """One delivery as a handler sees it.

    `hop` is the hop budget left for calls the handler makes onward; `client` is a
    `ReachClient` bound to the coordinator that passes `hop` and the trace on by
    itself, so ``await request.client.invoke("other.capability", payload=...)`` is
    counted as the next hop of the same trace. ``await request.context_data()`` is
    the agent's projection of the request's context, fetched only when asked for.
    """

    request_id: str
    capability: str
    payload: Any
    context: dict[str, Any] | None
    trace_id: str
    hop: int
    client: ReachClient
    text: str | None = None
    # {"token", "expires_at", "depth"} when the delivery may be handed on (docs/mesh.md)
    delegation: dict[str, Any] | None = None
    _context: _ContextLink | None = field(default=None, repr=False, compare=False)

    async def delegate(
        self,
        capability: str | None = None,
        *,
        text: str | None = None,
        payload: Any = None,
        **options: Any,
    ) -> InvokeResult:
        """Hand a sub-task on, on behalf of this request's caller: an invoke whose only
        credential is the delivery's delegation token (by capability or by text; the
        same `options` as `ReachClient.invoke`). The coordinator allows it only within
        the caller's rights and the policy's delegate rules (403 `delegation_denied`)."""
        if self.delegation is None:
            raise CallerError(
                "this delivery carries no delegation token: no [[access.delegate]] rule "
                "names this agent, and it did not register with delegation: true",
                code="no_delegation",
            )
        client = self.client.with_delegation(self.delegation["token"])
        return await client.invoke(capability, text=text, payload=payload, **options)

    async def context_data(self) -> dict[str, Any]:
        """This agent's projection of the request's context; {} when it carries none.

        Fetched from the coordinator with the delivery's token on the first call (only
        the `context_fields` the agent registered are in it), then cached; the next call
        after `update_context` fetches it again.
        """
        return {} if self._context is None else await self._context.load()

    @property
    def context_version(self) -> int | None:
        """The context's version as last read or written here; None before that."""
        return None if self._context is None else self._context.version

    async def update_context(self, patch: dict[str, Any], *, if_version: int | None = None) -> int:
        """Merge `patch` (RFC 7386) into the context and return the new version.

        Only the agent's `context_fields` may be written (else `ValidationFailed`,
        `field_not_writable`). With `if_version`, the write happens only while the
        context is still at that version, else `Conflict` (`version_conflict`).
        """
        if self._context is None:
            raise InvalidRequest("this request carries no context", code="no_context")
        return await self._context.update(patch, if_version)


class _ContextLink:
    """One delivery's context: its URL and token, and the projection once fetched."""

    def __init__(self, http: httpx.AsyncClient, url: str, token: str) -> None:
        self._http = http
        self._url = url
        self._auth = {"authorization": f"Bearer {token}"}
        self._lock = asyncio.Lock()
        self._data: dict[str, Any] | None = None
        self.version: int | None = None

    async def load(self) -> dict[str, Any]:
        async with self._lock:  # concurrent first calls share one fetch
            if self._data is None:
                answer = await self._call("GET", self._auth)
                self._data, self.version = answer["document"], answer["version"]
            return self._data

    async def update(self, patch: dict[str, Any], if_version: int | None) -> int:
        headers = {**self._auth, "content-type": MERGE_PATCH}
        if if_version is not None:
            headers["if-match"] = str(if_version)
        answer = await self._call("PATCH", headers, orjson.dumps(patch))
        self._data, self.version = None, int(answer["version"])
        return self.version

    async def _call(self, method: str, headers: dict[str, str], body: bytes = b"") -> Any:
        """The JSON answer; the `agent_reach.errors` class of an error answer."""
        try:
            response = await self._http.request(method, self._url, headers=headers, content=body)
        except httpx.TransportError as exc:
            raise ReachError(
                f"could not reach the context at {self._url}: {str(exc) or type(exc).__name__}",
                code="coordinator_unreachable",
            ) from None
        try:
            answer = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            answer = None
        if not response.is_success:
            raise error_from_body(response.status_code, answer)
        return answer


class _RunOnce:
    """request_id -> its run, so a repeated delivery awaits or replays it instead of re-running.

    A run that failed is forgotten once it ends (its waiters still get its error), so
    the coordinator's retry of a failed request runs the handler again.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._runs: OrderedDict[str, asyncio.Future[bytes | LiveStream]] = OrderedDict()

    async def run(
        self, request_id: str, start: Callable[[], Awaitable[bytes | LiveStream]]
    ) -> bytes | LiveStream:
        run = self._runs.get(request_id)
        if run is None:
            run = asyncio.ensure_future(start())
            self._runs[request_id] = run
            run.add_done_callback(partial(self._forget_failed, request_id))
            while len(self._runs) > self.size:
                self._runs.popitem(last=False)
        # shield: a caller that goes away must not cancel a run others may be waiting on
        return await asyncio.shield(run)

    def _forget_failed(self, request_id: str, run: asyncio.Future[bytes | LiveStream]) -> None:
        if (run.cancelled() or run.exception() is not None) and self._runs.get(request_id) is run:
            del self._runs[request_id]


class Agent:
    """An agent: handlers per capability, served over HTTP, registered while it runs.

    When `app` starts, the agent registers with the coordinator (and keeps retrying
    with backoff in the background if the coordinator is not up yet); it renews its
    lease every ``ttl / 3`` seconds, registers again when the coordinator has
    forgotten it, and deregisters when the app shuts down. A delivery whose
    `request_id` was seen before never runs a handler again: it gets the stored
    answer, or waits for the run still in flight.
    """

    def __init__(
        self,
        id: str,
        capabilities: Sequence[str],
        *,
        coordinator_url: str,
        description: str = "",
        examples: Sequence[str] = (),
        display_name: str = "",
        endpoint_url: str | None = None,
        ttl: float = DEFAULT_TTL_S,
        timeout_class: str = "query",
        weight: float = 1.0,
        domain: str = "default",
        generic: bool = False,
        context_fields: Sequence[str] = (),
        api_key: str | None = None,
        token_provider: TokenProvider | None = None,
        min_instances: int = 0,
        skills: Sequence[SkillSpec] = (),
        input_schema: dict[str, Any] | None = None,
        health_check: Callable[[], Awaitable[bool]] | None = None,
        tls_cert: str | Path | None = None,
        tls_key: str | Path | None = None,
        tls_client_ca: str | Path | None = None,
        coordinator_ca_file: str | Path | None = None,
        client_cert: str | Path | None = None,
        client_key: str | Path | None = None,
        cost: float = 0.0,
        delegation: bool = False,
        negotiate: bool | dict[str, Any] = False,
        idempotent: bool = True,
        safe: bool = False,
    ) -> None:
        """`skills` give capabilities their own description, examples and `input_schema`;
        `health_check`, when given, decides what `GET /health` answers (200 or 503);
        `token_provider` (an IdP token callable, or `ClientCredentials`) authenticates
        registration and heartbeats instead of `api_key`.

        TLS: with `tls_cert` and `tls_key` (PEM files) the agent serves HTTPS and
        registers an ``https://`` endpoint; with `tls_client_ca` too, it answers only
        callers (the coordinator) presenting a certificate that CA issued.
        `coordinator_ca_file` is trusted for an https coordinator beside the system's
        CAs; `client_cert` and `client_key` are presented to a coordinator that asks for
        a client certificate (its policy may map it to this agent's principal, so no
        key is needed). A file that cannot be used raises `TlsSettingError` here.

        The mesh (docs/mesh.md): `cost` is what one call spends from a delegation
        chain's budget; `delegation` asks for a delegation token on every delivery (to
        verify it) even when no delegate rule lets this agent hand work on.
        `negotiate` (True, or `{"timeout_ms"?, "endpoint"?}`) has the coordinator ask
        for an offer before each delivery; `@agent.offer` answers it (it turns
        negotiation on by itself), else every offer is accepted.

        `idempotent` (declared by default, since a repeated `request_id` never runs a
        handler again while it is remembered) lets the coordinator re-send a request
        whose earlier delivery's outcome is unknown; pass False for a handler whose
        failures may have acted (a failed run is forgotten and runs again). `safe`
        declares the handlers free of side effects (a lookup, a quote): such a request
        may be re-sent to any instance, and answered from an earlier answer (`degraded`)
        when no instance can; a skill may declare either for its own capability."""
        self.id = id
        self.capabilities = list(capabilities)
        self.coordinator_url = coordinator_url
        self.description = description
        self.examples = list(examples)
        self.display_name = display_name
        self.endpoint_url = endpoint_url
        self.ttl = ttl
        self.timeout_class = timeout_class
        self.weight = weight
        self.domain = domain
        self.generic = generic
        self.context_fields = list(context_fields)
        self.api_key = api_key
        self.token_provider = token_provider
        self.min_instances = min_instances
        self.skills = list(skills)
        self.input_schema = input_schema
        self.health_check = health_check
        self.cost = cost
        self.delegation = delegation
        self.negotiate = negotiate
        self.idempotent = idempotent
        self.safe = safe
        self._offer: OfferFn | None = None
        self.ssl_context = _serving_context(tls_cert, tls_key, tls_client_ca)
        self._coordinator_tls = coordinator_tls(coordinator_ca_file, client_cert, client_key)
        self._coordinator_files = (coordinator_ca_file, client_cert, client_key)
        self._handlers: dict[str, Callable[[AgentRequest], Awaitable[Any]]] = {}
        self._default: Callable[[AgentRequest], Awaitable[Any]] | None = None
        self._runs = _RunOnce(REMEMBERED_REQUESTS)
        self._client: ReachClient | None = None
        self._context_http: httpx.AsyncClient | None = None
        self._is_registered = False
        self.app = Starlette(
            routes=[
                Route("/invoke", self._invoke, methods=["POST"]),
                Route("/health", self._health, methods=["GET"]),
                Route("/offer", self._answer_offer, methods=["POST"]),
            ],
            lifespan=self._lifespan,
        )

    @property
    def is_registered(self) -> bool:
        """True from the first successful registration until the app shuts down."""
        return self._is_registered

    def handler(self, fn: HandlerT) -> HandlerT:
        """Decorator: the handler for every capability without a handler of its own.

        `fn` takes an `AgentRequest` and returns anything JSON-serializable; it may be
        `async def` or a plain function (run in a worker thread), or an async generator
        whose every `yield` is one event of a streamed answer. `request.client` is
        async, so only `async def` handlers can call other agents through it.
        """
        self._default = _as_async(fn)
        return fn

    def handle(self, capability: str) -> Callable[[HandlerT], HandlerT]:
        """Decorator: the handler for one capability (takes precedence over `handler`)."""

        def register(fn: HandlerT) -> HandlerT:
            self._handlers[normalize_capability(capability)] = _as_async(fn)
            return fn

        return register

    def offer(self, fn: OfferFn) -> OfferFn:
        """Decorator: what this agent offers when the coordinator asks before a delivery
        (docs/mesh.md, "Negotiation"); turns negotiation on.

        `fn` takes an `OfferRequest` (`capability`, `text`, `params`, `deadline_ms`,
        `budget_left`: never the payload or the context) and returns an `OfferAnswer`,
        its dict form (`{"accept", "eta_ms"?, "confidence"?, "cost"?}`) or a bool; it
        may be `async def`. It must answer within the registration's `timeout_ms`.
        """
        self._offer = fn
        return fn

    def spec(self) -> AgentSpec:
        """The registration body this agent sends; needs `endpoint_url` to be set."""
        if self.endpoint_url is None:
            raise RuntimeError(
                f"agent {self.id!r} has no endpoint_url: use serve() or set it before starting"
            )
        health = (
            self.endpoint_url.removesuffix("/invoke") + "/health"
            if self.endpoint_url.endswith("/invoke")
            else None
        )
        return AgentSpec(
            id=self.id,
            display_name=self.display_name,
            capabilities=self.capabilities,
            description=self.description,
            examples=self.examples,
            transport=TransportSpec(endpoint=self.endpoint_url, health_endpoint=health),
            ttl=self.ttl,
            timeout_class=self.timeout_class,
            weight=self.weight,
            domain=self.domain,
            generic=self.generic,
            context_fields=self.context_fields,
            min_instances=self.min_instances,
            skills=self.skills,
            input_schema=self.input_schema,
            cost=self.cost,
            delegation=self.delegation,
            negotiate=self._negotiate_spec(),
            idempotent=self.idempotent,
            safe=self.safe,
        )

    def _negotiate_spec(self) -> NegotiateSpec | None:
        """The registration's `negotiate`: the agent's own `/offer` unless told otherwise."""
        if not self.negotiate and self._offer is None:
            return None
        given = self.negotiate if isinstance(self.negotiate, dict) else {}
        assert self.endpoint_url is not None  # spec() checked it
        base = self.endpoint_url.removesuffix("/invoke").rstrip("/")
        return NegotiateSpec.model_validate({"endpoint": f"{base}/offer", **given})

    def serve(self, host: str = "127.0.0.1", port: int = 0, *, log_level: str = "info") -> None:
        """Serve the agent with uvicorn until interrupted (blocking).

        Port 0 picks a free port. Unless `endpoint_url` was set, the agent registers
        ``http://<host>:<port>/invoke`` (``https://`` when it serves TLS) with the port
        actually bound (the machine's host name when `host` binds every interface).
        """
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        # Listen before the lifespan registers us, so an early delivery waits in the backlog
        # instead of being refused (uvicorn only listens once startup has finished).
        sock.listen(BACKLOG)
        if self.endpoint_url is None:
            advertised = socket.gethostname() if host in _WILDCARD_HOSTS else host
            if ":" in advertised:
                advertised = f"[{advertised}]"
            scheme = "http" if self.ssl_context is None else "https"
            self.endpoint_url = f"{scheme}://{advertised}:{sock.getsockname()[1]}/invoke"
        config = uvicorn.Config(self.app, lifespan="on", access_log=False, log_level=log_level)
        if self.ssl_context is not None:
            config.load()
            config.ssl = self.ssl_context  # uvicorn serves the context given, as built
        uvicorn.Server(config).run(sockets=[sock])

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        spec = self.spec()
        async with (
            ReachClient(
                self.coordinator_url,
                api_key=self.api_key,
                token_provider=self.token_provider,
                ca_file=self._coordinator_files[0],
                client_cert=self._coordinator_files[1],
                client_key=self._coordinator_files[2],
            ) as client,
            # Context URLs in deliveries are relative to the coordinator unless it says otherwise.
            httpx.AsyncClient(
                base_url=self.coordinator_url,
                timeout=CONTEXT_TIMEOUT_S,
                verify=self._coordinator_tls,
            ) as http,
        ):
            self._client, self._context_http = client, http
            # One attempt before serving, so a started agent is registered whenever the
            # coordinator is up; a refusal (4xx) fails startup instead of running unseen.
            await self._try_register(client, spec)
            keeper = asyncio.create_task(self._keep_lease(client, spec), name=f"lease-{self.id}")
            try:
                yield
            finally:
                keeper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await keeper
                await self._deregister(client)
                self._client = self._context_http = None

    async def _keep_lease(self, client: ReachClient, spec: AgentSpec) -> None:
        """Register if not yet, heartbeat every ttl/3, register again whenever the lease is lost."""
        try:
            if not self._is_registered:
                await self._register(client, spec)
            while True:
                await asyncio.sleep(spec.ttl / HEARTBEATS_PER_TTL)
                try:
                    await client.heartbeat(spec.id)
                except NotFound:
                    log.warning("agent_lease_lost", agent_id=spec.id)
                    await self._register(client, spec)
                except ReachError as exc:
                    log.warning("agent_heartbeat_failed", agent_id=spec.id, code=exc.code)
        except CallerError as exc:
            log.error(
                "agent_registration_refused", agent_id=spec.id, code=exc.code, error=exc.message
            )

    async def _register(self, client: ReachClient, spec: AgentSpec) -> None:
        """Register, retrying with jittered exponential backoff until the coordinator takes it."""
        delay_s = REGISTER_BACKOFF_FIRST_S
        while not await self._try_register(client, spec):
            await asyncio.sleep(delay_s * _rng.uniform(0.5, 1.0))
            delay_s = min(delay_s * 2, REGISTER_BACKOFF_MAX_S)

    async def _try_register(self, client: ReachClient, spec: AgentSpec) -> bool:
        """One attempt; False (logged) when the coordinator did not answer. Raises `CallerError`."""
        try:
            await client.register(spec)
        except CallerError:
            raise
        except ReachError as exc:
            log.warning("agent_registration_failed", agent_id=spec.id, code=exc.code)
            return False
        self._is_registered = True
        log.info("agent_registered", agent_id=spec.id, endpoint=spec.transport.endpoint)
        return True

    async def _deregister(self, client: ReachClient) -> None:
        if not self._is_registered:
            return
        self._is_registered = False
        try:
            await client.deregister(self.id)
        except NotFound:
            pass  # the coordinator had already forgotten us: the goal is reached
        except ReachError as exc:
            log.warning("agent_deregistration_failed", agent_id=self.id, code=exc.code)

    async def _invoke(self, request: Request) -> Response:
        try:
            delivery = _DELIVERY.validate_json(await request.body())
        except ValidationError as exc:
            return _error(400, "invalid_delivery", f"the body is not a valid delivery: {exc}")
        if self._client is None or self._context_http is None:
            return _error(503, "agent_not_started", "the agent's lifespan has not started")
        handler = self._handlers.get(delivery.capability, self._default)
        if handler is None:
            return _error(404, "no_handler", f"no handler for capability {delivery.capability!r}")
        agent_request = AgentRequest(
            request_id=delivery.request_id,
            capability=delivery.capability,
            payload=delivery.payload,
            context=delivery.context,
            trace_id=delivery.trace_id,
            hop=delivery.hop,
            text=delivery.text,
            delegation=delivery.delegation,
            client=self._client.for_handler(
                hop=delivery.hop, traceparent=request.headers.get("traceparent")
            ),
            _context=_context_link(self._context_http, delivery.context),
        )
        try:
            body = await self._runs.run(delivery.request_id, partial(_run, handler, agent_request))
            if isinstance(body, LiveStream):
                if body.take():  # the delivery that started the run relays it as it comes
                    return StreamingResponse(body.relay(), media_type=MEDIA_TYPE)
                return Response(await body.whole, media_type=MEDIA_TYPE)
        except RetryLater as exc:
            return _error(503, "retry_later", str(exc) or "the agent cannot take it now")
        except ReachError as exc:
            # A call the handler made through Agent-Reach failed (e.g. `hop_limit`): the
            # caller gets that error, not a generic handler failure.
            headers = None if exc.retryable else {"x-reach-retryable": "false"}
            return json_response(exc.to_body(), exc.status, headers)
        except Exception as exc:
            # A crash in the handler would crash on any instance: tell the coordinator to stop.
            return _error(500, "handler_error", str(exc) or type(exc).__name__, retryable=False)
        return Response(body, media_type="application/json")

    async def _answer_offer(self, request: Request) -> Response:
        try:
            asked = _OFFER_REQUEST.validate_json(await request.body())
        except ValidationError as exc:
            return _error(400, "invalid_offer_request", f"not an offer request: {exc}")
        if self._offer is None:
            return json_response({"accept": True})
        try:
            answered = self._offer(asked)
            if inspect.isawaitable(answered):
                answered = await answered
            if isinstance(answered, bool):
                answered = OfferAnswer(accept=answered)
            offer = OfferAnswer.model_validate(answered)
        except Exception as exc:
            return _error(500, "offer_error", str(exc) or type(exc).__name__, retryable=False)
        return json_response(offer.model_dump(exclude_none=True))

    async def _health(self, request: Request) -> Response:
        if self.health_check is not None and not await self.health_check():
            return json_response({"status": "unavailable", "id": self.id}, 503)
        return json_response({"status": "ok", "id": self.id})


async def _run(
    handler: Callable[[AgentRequest], Awaitable[Any]], request: AgentRequest
) -> bytes | LiveStream:
    """Run a handler once and encode its answer (a yielding handler's: its stream, once
    the first event is there); a failure is logged here, once per run."""
    failed = partial(_log_failure, request)
    try:
        result = await handler(request)
        if isinstance(result, AsyncIterator):
            return await LiveStream.open(result, failed)
        return dump_json(result)
    except Exception as exc:
        failed(exc)
        raise


def _log_failure(request: AgentRequest, exc: Exception) -> None:
    # One line, no traceback rendering: pretty tracebacks cost ~0.4 s on the event loop.
    log.error(
        "handler_failed",
        request_id=request.request_id,
        trace_id=request.trace_id,
        capability=request.capability,
        error=f"{type(exc).__name__}: {exc}",
    )


def _context_link(http: httpx.AsyncClient, block: dict[str, Any] | None) -> _ContextLink | None:
    """The link to a delivery's ``{"id", "token", "url"}`` block, when it has one."""
    if block is None:
        return None
    url, token = block.get("url"), block.get("token")
    if not isinstance(url, str) or not isinstance(token, str):
        return None
    return _ContextLink(http, url, token)


def _serving_context(
    cert: str | Path | None, key: str | Path | None, client_ca: str | Path | None
) -> ssl.SSLContext | None:
    """The agent's HTTPS context, or None to serve plain HTTP."""
    if cert is None and key is None and client_ca is None:
        return None
    if cert is None or key is None:
        raise TlsSettingError("tls_cert and tls_key go together (tls_client_ca needs both)")
    return server_context(
        Path(cert),
        Path(key),
        None if client_ca is None else Path(client_ca),
        names=("tls_cert", "tls_key", "tls_client_ca"),
    )


def _as_async(fn: Callable[[AgentRequest], Any]) -> Callable[[AgentRequest], Awaitable[Any]]:
    if inspect.iscoroutinefunction(fn):
        return fn
    if inspect.isasyncgenfunction(fn):

        async def started(request: AgentRequest) -> Any:
            return fn(request)  # its events, pulled as the response is written

        return started

    async def in_thread(request: AgentRequest) -> Any:
        return await asyncio.to_thread(fn, request)

    return in_thread


def _error(status: int, code: str, message: str, *, retryable: bool = True) -> Response:
    headers = None if retryable else {"x-reach-retryable": "false"}
    return json_response({"error": {"code": code, "message": message}}, status, headers)
