"""The signing keys of each trusted issuer: discovered, fetched, cached and shared.

An issuer's discovery document (`<issuer>/.well-known/openid-configuration`) names its
`jwks_uri`; the key set fetched from there is kept for `ttl_s`, and shared through the
backend's `KeySetStore` so one coordinator's fetch serves every coordinator. A token
whose `kid` is not in the set asks for a refetch, at most once per `refresh_s` per
issuer (a flood of made-up kids cannot hammer the IdP). When the IdP does not answer,
the keys already held keep working — past their expiry too — and an unknown kid stays
unknown: the caller gets a 401, never a 500 or a wait beyond `timeout_s`. A failed
fetch is kept as what it was (certificate not trusted, connection refused, timed out,
an HTTP status, not JSON) for the 401's message, the log and `GET /v1/policy`.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import structlog
from jwt import PyJWK, PyJWKSet
from jwt.exceptions import PyJWKError, PyJWKSetError

from agent_reach.backends.protocols import KeySetStore
from agent_reach.clock import Clock

log = structlog.get_logger("agent_reach.identity")

MAX_DOCUMENT_BYTES = 256 * 1024  # a JWKS of a few dozen keys is a few KiB
DISCOVERY_PATH = "/.well-known/openid-configuration"
STORE_PREFIX = "jwks:"


class IssuerUnavailable(Exception):
    """The issuer's discovery document or key set could not be fetched or read."""


@dataclass(slots=True)
class _Held:
    """One issuer's keys by kid (None for a key without one) and when they were fetched."""

    keys: dict[str | None, PyJWK] = field(default_factory=dict)
    fetched_at: float = float("-inf")  # wall clock, shared with other coordinators
    asked_at: float = float("-inf")  # monotonic: the last refetch for an unknown kid
    failed_at: float = float("-inf")  # monotonic: the last fetch the IdP did not answer
    jwks_uri: str | None = None
    refreshing: asyncio.Task[None] | None = None
    failure: str | None = None  # why the last fetch failed, until one succeeds
    failed_at_wall: float | None = None


class KeySets:
    """Keys by issuer and kid; `key` fetches when needed, `held` never waits."""

    def __init__(
        self,
        issuers: list[str],
        store: KeySetStore,
        clock: Clock,
        *,
        ttl_s: float,
        refresh_s: float,
        timeout_s: float,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self.issuers = tuple(issuers)
        self._store = store
        self._clock = clock
        self._ttl_s = ttl_s
        self._refresh_s = refresh_s
        self._held = {issuer: _Held() for issuer in issuers}
        self._locks = {issuer: asyncio.Lock() for issuer in issuers}
        self._timeout_s = timeout_s
        self._client = httpx.AsyncClient(timeout=timeout_s, verify=verify, follow_redirects=False)
        self.generation = 0  # grows whenever any issuer's keys change

    def held(self, issuer: str, kid: str | None) -> PyJWK | None:
        """The key when it is held and fresh; None when `key` must be asked."""
        held = self._held.get(issuer)
        if held is None or self._is_stale(held):
            return None
        return held.keys.get(kid)

    async def key(self, issuer: str, kid: str | None) -> PyJWK | None:
        """The issuer's key `kid`, or None when the issuer has no such key (or could not
        be asked). A stale set still serves the kids it holds while it is refreshed in
        the background; only a kid it lacks waits for a refetch."""
        held = self._held[issuer]
        if kid in held.keys:
            if self._is_stale(held) and held.refreshing is None:
                held.refreshing = asyncio.create_task(self._refresh(issuer, held))
            return held.keys[kid]
        async with self._locks[issuer]:
            if kid not in held.keys:
                await self._take_shared(issuer, held)
            now = self._clock.monotonic()
            if not held.keys:  # the first fetch: not a refetch, not rate limited as one
                await self._refetch(issuer, held)
            elif kid not in held.keys and now - held.asked_at >= self._refresh_s:
                held.asked_at = now
                await self._refetch(issuer, held)
        return held.keys.get(kid)

    def failure(self, issuer: str) -> str | None:
        """Why the issuer's keys could not be fetched the last time; None once a fetch
        (here or, shared, on another coordinator) has succeeded since."""
        held = self._held.get(issuer)
        return None if held is None else held.failure

    def status(self, issuer: str) -> dict[str, Any]:
        """What this coordinator holds of the issuer's keys, and its last fetch failure."""
        held = self._held[issuer]
        fetched = held.fetched_at if held.fetched_at != float("-inf") else None
        return {
            "keys": len(held.keys),
            "fetched_at": fetched,
            "jwks_uri": held.jwks_uri,
            "fetch_error": held.failure,
            "fetch_failed_at": held.failed_at_wall,
        }

    async def aclose(self) -> None:
        for held in self._held.values():
            if held.refreshing is not None:
                held.refreshing.cancel()
        await self._client.aclose()

    def _is_stale(self, held: _Held) -> bool:
        return self._clock.wall() - held.fetched_at >= self._ttl_s

    async def _refresh(self, issuer: str, held: _Held) -> None:
        """Renew a stale set: another coordinator's newer fetch, else the IdP."""
        try:
            async with self._locks[issuer]:
                await self._take_shared(issuer, held)
                if self._is_stale(held):
                    await self._refetch(issuer, held)
        finally:
            held.refreshing = None

    async def _take_shared(self, issuer: str, held: _Held) -> None:
        """Adopt the set another coordinator fetched, when it is newer than ours."""
        shared = await self._store.get(STORE_PREFIX + issuer)
        if shared is None:
            return
        document = orjson.loads(shared)
        if document["fetched_at"] > held.fetched_at:
            self._adopt(held, document["jwks"], document["fetched_at"])

    async def _refetch(self, issuer: str, held: _Held) -> None:
        """Fetch the set from the IdP and share it; when the IdP does not answer, the
        held keys stay and it is not asked again for `refresh_s`."""
        now = self._clock.monotonic()
        if now - held.failed_at < self._refresh_s:
            return
        try:
            jwks = await self._fetch(issuer, held)
        except IssuerUnavailable as exc:
            held.failed_at = now
            held.failure, held.failed_at_wall = str(exc), self._clock.wall()
            log.warning("jwks_unavailable", issuer=issuer, reason=str(exc), held=len(held.keys))
            return
        fetched_at = self._clock.wall()
        self._adopt(held, jwks, fetched_at)
        document = orjson.dumps({"fetched_at": fetched_at, "jwks": jwks})
        await self._store.put(STORE_PREFIX + issuer, document, self._ttl_s)

    def _adopt(self, held: _Held, jwks: dict[str, object], fetched_at: float) -> None:
        keys = signing_keys(jwks)
        if set(keys) != set(held.keys):
            self.generation += 1
        held.keys, held.fetched_at = keys, fetched_at
        held.failure = held.failed_at_wall = None

    async def _fetch(self, issuer: str, held: _Held) -> dict[str, object]:
        if held.jwks_uri is None:
            metadata = await self._get_json(issuer.rstrip("/") + DISCOVERY_PATH)
            if metadata.get("issuer") != issuer:
                raise IssuerUnavailable(
                    f"the discovery document names issuer {metadata.get('issuer')!r}"
                )
            jwks_uri = metadata.get("jwks_uri")
            if not isinstance(jwks_uri, str) or not jwks_uri.startswith(("https://", "http://")):
                raise IssuerUnavailable("the discovery document has no jwks_uri")
            held.jwks_uri = jwks_uri
        return await self._get_json(held.jwks_uri)

    async def _get_json(self, url: str) -> dict[str, object]:
        try:
            response = await self._client.get(url, headers={"accept": "application/json"})
        except httpx.HTTPError as exc:
            raise IssuerUnavailable(f"{url}: {fetch_failure(exc, self._timeout_s)}") from None
        if response.status_code != 200:
            raise IssuerUnavailable(f"{url}: answered HTTP {response.status_code}")
        if len(response.content) > MAX_DOCUMENT_BYTES:
            raise IssuerUnavailable(f"{url}: more than {MAX_DOCUMENT_BYTES} bytes")
        try:
            document = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            raise IssuerUnavailable(f"{url}: not JSON") from None
        if not isinstance(document, dict):
            raise IssuerUnavailable(f"{url}: not a JSON object")
        return document


def fetch_failure(exc: httpx.HTTPError, timeout_s: float) -> str:
    """What a failed request met, in words an operator acts on."""
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out after {timeout_s:g} s (AR_OIDC_TIMEOUT_S)"
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return (
                f"its TLS certificate is not trusted ({cause.verify_message}); "
                "AR_OIDC_CA_FILE names the CA to trust"
            )
        if isinstance(cause, ssl.SSLError):
            return f"the TLS handshake failed ({cause.reason or cause})"
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, socket.gaierror):
            return f"its host name does not resolve ({cause.strerror})"
        cause = cause.__cause__ or cause.__context__
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" in text:  # the cause chain is not always kept
        return f"its TLS certificate is not trusted ({text}); AR_OIDC_CA_FILE names the CA"
    if "Connection refused" in text or "Errno 111" in text:
        return "connection refused"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def signing_keys(jwks: dict[str, object]) -> dict[str | None, PyJWK]:
    """The usable signature keys of a JWKS by kid: public keys whose algorithm is known
    (the key's `alg`, else the one its type implies); symmetric keys are never taken."""
    listed = jwks.get("keys")
    if not isinstance(listed, list):
        return {}
    usable = [
        k
        for k in listed
        if isinstance(k, dict) and k.get("use", "sig") == "sig" and k.get("kty") != "oct"
    ]
    try:
        keys = PyJWKSet.from_dict({"keys": usable}).keys
    except (PyJWKSetError, PyJWKError):
        return {}
    return {key.key_id: key for key in keys if key.algorithm_name not in ("none", "")}
