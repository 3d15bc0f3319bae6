"""Bearer tokens from the organisation's IdP for the SDK, instead of an API key.

A `token_provider` is either a callable returning a token (sync or async; called for
every request, so it does its own caching) or `ClientCredentials`, which fetches access
tokens from the IdP's token endpoint (OAuth 2.0 client credentials, RFC 6749 4.4) and
fetches the next one once 80 % of a token's lifetime has passed. Either way, a request
refused with 401 `token_expired` is sent once more with a fresh token.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Iterable, Iterator
from typing import Any, TypeAlias

import httpx
import orjson

from agent_reach.errors import TokenUnavailable

REFRESH_AT = 0.8  # of a token's lifetime: the next one is fetched from then on
TOKEN_TIMEOUT_S = 10.0
DISCOVERY_PATHS = ("/.well-known/openid-configuration", "/.well-known/oauth-authorization-server")
EXPIRED_CODE = "token_expired"

TokenCallable: TypeAlias = Callable[[], str | Awaitable[str]]


class ClientCredentials:
    """OAuth client-credentials settings: where and as whom to ask the IdP for tokens.

    Give `token_url`, or `issuer` (its token endpoint is found in the discovery
    document). `scope` and `resource` (RFC 8707, the coordinator's audience) are sent
    when set, `audience` too for IdPs that take it instead (Auth0). The client
    authenticates with HTTP Basic (`client_secret_basic`) unless
    ``auth_method="client_secret_post"``. One object may serve several clients.
    """

    def __init__(
        self,
        client_id: str,
        client_secret: str,
        *,
        token_url: str | None = None,
        issuer: str | None = None,
        scope: str | None = None,
        resource: str | None = None,
        audience: str | None = None,
        auth_method: str = "client_secret_basic",
        timeout_s: float = TOKEN_TIMEOUT_S,
        verify: Any = True,
    ) -> None:
        if (token_url is None) == (issuer is None):
            raise ValueError("ClientCredentials needs exactly one of token_url and issuer")
        if auth_method not in ("client_secret_basic", "client_secret_post"):
            raise ValueError(f"unsupported auth_method {auth_method!r}")
        self.client_id = client_id
        self.issuer = issuer
        self.token_url = token_url
        self.scope = scope
        self.resource = resource
        self.audience = audience
        self.auth_method = auth_method
        self._secret = client_secret
        self._timeout_s = timeout_s
        self._verify = verify
        self._token: str | None = None
        self._fresh_until = 0.0  # monotonic: the token is used until then
        self._sync_lock = threading.Lock()
        self._pending: tuple[asyncio.AbstractEventLoop, asyncio.Future[str]] | None = None

    def __repr__(self) -> str:
        return f"ClientCredentials(client_id={self.client_id!r}, token_url={self.token_url!r})"

    def token(self) -> str:
        """The current token, fetched (blocking) when there is none or it is due."""
        with self._sync_lock:
            fresh = self._fresh()
            if fresh is not None:
                return fresh
            with (
                _unreachable_idp(self.token_url or self.issuer),
                httpx.Client(timeout=self._timeout_s, verify=self._verify) as http,
            ):
                if self.token_url is None:
                    self.token_url = _endpoint(http.get(url) for url in self._discovery_urls())
                return self._keep(_answer(http.post(self.token_url, **self._request())))

    async def atoken(self) -> str:
        """The current token; when one is due, concurrent callers share one fetch."""
        fresh = self._fresh()
        if fresh is not None:
            return fresh
        loop = asyncio.get_running_loop()
        pending = self._pending
        if pending is not None and pending[0] is loop and not pending[1].done():
            return await asyncio.shield(pending[1])
        future = loop.create_task(self._fetch())
        self._pending = (loop, future)
        return await asyncio.shield(future)

    def expire(self, token: str) -> None:
        """Stop using `token` (the coordinator found it expired): the next call fetches."""
        if token == self._token:
            self._fresh_until = 0.0

    async def _fetch(self) -> str:
        with _unreachable_idp(self.token_url or self.issuer):
            return await self._fetch_from_idp()

    async def _fetch_from_idp(self) -> str:
        async with httpx.AsyncClient(timeout=self._timeout_s, verify=self._verify) as http:
            if self.token_url is None:
                answers = []
                for url in self._discovery_urls():
                    answers.append(await http.get(url))
                    if answers[-1].status_code == 200:
                        break
                self.token_url = _endpoint(answers)
            return self._keep(_answer(await http.post(self.token_url, **self._request())))

    def _fresh(self) -> str | None:
        if self._token is not None and time.monotonic() < self._fresh_until:
            return self._token
        return None

    def _discovery_urls(self) -> list[str]:
        assert self.issuer is not None
        return [self.issuer.rstrip("/") + path for path in DISCOVERY_PATHS]

    def _request(self) -> dict[str, Any]:
        form = {"grant_type": "client_credentials"}
        for name in ("scope", "resource", "audience"):
            value = getattr(self, name)
            if value is not None:
                form[name] = value
        if self.auth_method == "client_secret_post":
            return {"data": {**form, "client_id": self.client_id, "client_secret": self._secret}}
        return {"data": form, "auth": (self.client_id, self._secret)}

    def _keep(self, answer: dict[str, Any]) -> str:
        token, lifetime = answer.get("access_token"), answer.get("expires_in")
        if not isinstance(token, str) or not token:
            raise TokenUnavailable("the IdP's token answer holds no access_token")
        self._token = token
        # No expires_in: used until the coordinator says it expired.
        seconds = float(lifetime) if isinstance(lifetime, int | float) else float("inf")
        self._fresh_until = time.monotonic() + REFRESH_AT * seconds
        return token


TokenProvider: TypeAlias = TokenCallable | ClientCredentials


@contextlib.contextmanager
def _unreachable_idp(where: str | None) -> Iterator[None]:
    """An IdP that cannot be reached is `TokenUnavailable`, not the coordinator's outage."""
    try:
        yield
    except httpx.HTTPError as exc:
        raise TokenUnavailable(
            f"could not reach the IdP at {where}: {str(exc) or type(exc).__name__}"
        ) from None


def _answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON object of a 200 answer; `TokenUnavailable` naming the IdP's error otherwise."""
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        body = None
    if response.status_code != 200 or not isinstance(body, dict):
        error = body.get("error") if isinstance(body, dict) else None
        raise TokenUnavailable(
            f"{response.request.url}: HTTP {response.status_code}"
            + (f" ({error}: {body.get('error_description', '')})" if error else "")
        )
    return body


def _endpoint(answers: Iterable[httpx.Response]) -> str:
    """The token endpoint named by the first discovery document found (OpenID Connect
    Discovery, then RFC 8414 authorization server metadata)."""
    for response in answers:
        if response.status_code != 200:
            continue
        endpoint = _answer(response).get("token_endpoint")
        if isinstance(endpoint, str) and endpoint.startswith(("https://", "http://")):
            return endpoint
    raise TokenUnavailable("the IdP publishes no discovery document naming a token_endpoint")


class BearerAuth(httpx.Auth):
    """httpx authentication with a token provider: every request carries the current
    token; a 401 `token_expired` is retried once with a fresh one."""

    def __init__(self, provider: TokenProvider) -> None:
        self.provider = provider

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        token = self._sync_token()
        request.headers["authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 401:
            response.read()
            if _expired(response):
                self._expire(token)
                fresh = self._sync_token()
                if fresh != token:
                    request.headers["authorization"] = f"Bearer {fresh}"
                    yield request

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        token = await self._async_token()
        request.headers["authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 401:
            await response.aread()
            if _expired(response):
                self._expire(token)
                fresh = await self._async_token()
                if fresh != token:
                    request.headers["authorization"] = f"Bearer {fresh}"
                    yield request

    def _sync_token(self) -> str:
        if isinstance(self.provider, ClientCredentials):
            return self.provider.token()
        token = self.provider()
        if inspect.isawaitable(token):
            _close(token)
            raise TypeError("a blocking client needs a token provider that is not async")
        return token

    async def _async_token(self) -> str:
        if isinstance(self.provider, ClientCredentials):
            return await self.provider.atoken()
        token = self.provider()
        return await token if inspect.isawaitable(token) else token

    def _expire(self, token: str) -> None:
        if isinstance(self.provider, ClientCredentials):
            self.provider.expire(token)


def _expired(response: httpx.Response) -> bool:
    """Whether the coordinator refused the request for an expired token."""
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return False
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, dict) and error.get("code") == EXPIRED_CODE


def _close(awaitable: Awaitable[Any]) -> None:
    """Close a coroutine that will never be awaited (no 'never awaited' warning)."""
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()
