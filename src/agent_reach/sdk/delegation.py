"""For agents: check a delivery's delegation token with the coordinator's public keys.

Every delivery that carries `delegation` says, signed by the coordinators, on whose
behalf it comes and through which agents. `DelegationVerifier` fetches the keys from
`GET /.well-known/jwks.json` (again when a token names a key it has not seen, at most
every `REFETCH_S`; tokens verified at once share one fetch) and checks the signature,
the issuer, the audience and the expiry:

    verifier = DelegationVerifier("http://127.0.0.1:8500")
    seen = await verifier.verify(request.delegation["token"])
    seen.caller, [hop.agent for hop in seen.chain]

Agents in other languages do the same with any JOSE library (docs/mesh.md).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
from jwt import PyJWK
from jwt.exceptions import PyJWTError

from agent_reach.errors import Unauthorized

ALGORITHM = "EdDSA"
JWKS_PATH = "/.well-known/jwks.json"
REFETCH_S = 10.0  # a made-up kid cannot make the verifier hammer the coordinator


@dataclass(frozen=True, slots=True)
class Hop:
    """One agent a delegation came through: its principal, instance and capability."""

    agent: str
    instance: str
    capability: str


@dataclass(frozen=True, slots=True)
class VerifiedDelegation:
    """What a verified token says: on whose behalf, through whom (oldest first, this
    agent last), what may be handed on, and until when."""

    caller: str
    chain: tuple[Hop, ...]
    scope: tuple[str, ...]
    context_id: str | None
    hop: int
    budget: float | None
    request_id: str
    expires_at: float
    claims: dict[str, Any]


class DelegationVerifier:
    """Verifies delegation tokens against one coordinator cluster's keys."""

    def __init__(self, coordinator_url: str, *, timeout_s: float = 5.0, verify: Any = True) -> None:
        self.url = coordinator_url.rstrip("/")
        self._http = httpx.AsyncClient(timeout=timeout_s, verify=verify)
        self._keys: dict[str, PyJWK] = {}
        self._fetched_at = float("-inf")  # when the last fetch ended (monotonic)
        self._fetching = asyncio.Lock()  # one fetch at a time; the others wait for its keys

    async def verify(self, token: str) -> VerifiedDelegation:
        """The token's statement; `Unauthorized` (`delegation_invalid`) when it is not
        the coordinators' own, valid now."""
        try:
            kid = jwt.get_unverified_header(token).get("kid")
        except PyJWTError:
            raise _invalid("not a JWT") from None
        if not isinstance(kid, str):
            raise _invalid("its header names no key (kid)")
        key = self._keys.get(kid) or await self._fetched_key(kid)
        if key is None:
            raise _invalid("signed with a key the coordinator does not publish")
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
            claims = jwt.decode(
                token,
                key,
                algorithms=[ALGORITHM],
                audience=unverified.get("iss"),
                issuer=unverified.get("iss"),
                options={"require": ["exp", "iss", "aud", "sub", "may_act"]},
            )
        except PyJWTError as exc:
            raise _invalid(str(exc)) from None
        return _statement(claims)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _fetched_key(self, kid: str) -> PyJWK | None:
        """The key `kid` after a fetch, unless one ended less than `REFETCH_S` ago. A
        verification that waited for another's fetch takes the keys it brought."""
        async with self._fetching:
            key = self._keys.get(kid)
            if key is None and time.monotonic() - self._fetched_at >= REFETCH_S:
                try:
                    await self._fetch()
                finally:
                    # After the fetch, not before: a verification arriving meanwhile
                    # waits for these keys instead of finding "fetched" and none.
                    self._fetched_at = time.monotonic()
                key = self._keys.get(kid)
            return key

    async def _fetch(self) -> None:
        try:
            response = await self._http.get(self.url + JWKS_PATH)
            response.raise_for_status()
            keys = response.json()["keys"]
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            raise _invalid(f"the coordinator's keys could not be read ({exc})") from None
        self._keys = {k["kid"]: PyJWK(k) for k in keys if k.get("alg") == ALGORITHM}


def _statement(claims: dict[str, Any]) -> VerifiedDelegation:
    hops: list[Hop] = []
    link: dict[str, Any] | None = claims["may_act"]
    acts = claims.get("act")
    while link is not None:
        hops.append(Hop(link["sub"], link["instance"], link["cap"]))
        link, acts = acts, (acts or {}).get("act")
    budget = claims.get("budget")
    return VerifiedDelegation(
        caller=claims["sub"],
        chain=tuple(reversed(hops)),
        scope=tuple(str(claims.get("scope", "")).split()),
        context_id=claims.get("ctx"),
        hop=int(claims.get("hop", 0)),
        budget=None if budget is None else float(budget),
        request_id=str(claims.get("rid", "")),
        expires_at=float(claims["exp"]),
        claims=claims,
    )


def _invalid(why: str) -> Unauthorized:
    return Unauthorized(f"the delegation token is not valid: {why}", code="delegation_invalid")
