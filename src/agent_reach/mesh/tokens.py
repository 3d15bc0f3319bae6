"""Delegation tokens: a chain as a signed JWT, and back.

Claims (docs/mesh.md): `sub` the original caller and `caller` its role, domain and
grants; `act` the agents so far in RFC 8693 §4.1 form (nested, newest outermost);
`may_act` the agent holding the token (RFC 8693 §4.4); `scope` the capabilities the
holder may hand on; `ctx` the context it may pass on; `hop` the hops left; `budget`
the chain's whole budget (spent centrally under `root`); `rid` the delivery's request
id; `jti`; `exp` no later than the request's deadline.
"""

from __future__ import annotations

import secrets
from typing import Any

import jwt
from jwt.exceptions import PyJWTError

from agent_reach.clock import Clock
from agent_reach.errors import Unauthorized
from agent_reach.mesh.signing import ALGORITHM, SigningKey, SigningKeys
from agent_reach.model.keys import ROLES, Chain, Link, Principal

TOKEN_TYPE = "delegation+jwt"  # noqa: S105 -- the header's `typ`: a delegation token, not an IdP token


def is_delegation_token(token: str) -> bool:
    """Whether a JWT says it is a delegation token (its header's `typ`); verified later."""
    try:
        return jwt.get_unverified_header(token).get("typ") == TOKEN_TYPE
    except PyJWTError:
        return False


class DelegationTokens:
    """Signs chains into tokens and verifies presented tokens back into chains."""

    def __init__(self, keys: SigningKeys, issuer: str, clock: Clock) -> None:
        self.keys = keys
        self.issuer = issuer
        self._clock = clock

    def sign(self, chain: Chain, request_id: str, key: SigningKey) -> str:
        """The token of `chain` for the delivery `request_id`."""
        now = self._clock.wall()
        caller, holder = chain.caller, chain.holder
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": self.issuer,
            "sub": caller.name,
            "caller": {
                "role": caller.role,
                "domain": caller.domain,
                "grants": list(caller.capabilities),
                "key": caller.key_id,
            },
            "may_act": _link_claim(holder),
            "scope": " ".join(chain.scope),
            "ctx": chain.context_id,
            "hop": chain.hop,
            "budget": chain.budget,
            "rid": request_id,
            "root": chain.root,
            "jti": secrets.token_urlsafe(12),
            "iat": int(now),
            "exp": chain.expires_at,
        }
        act = _act_claim(chain.links[:-1])
        if act is not None:
            claims["act"] = act
        headers = {"kid": key.kid, "typ": TOKEN_TYPE}
        return jwt.encode(claims, key.private, ALGORITHM, headers)

    async def verify(self, token: str) -> Chain:
        """The chain a token states; 401 `delegation_invalid` unless this backend's
        coordinators signed it with a key not rotated out, and it has not expired."""
        try:
            header = jwt.get_unverified_header(token)
        except PyJWTError:
            raise _invalid("not a well-formed JWT") from None
        kid = header.get("kid")
        if header.get("alg") != ALGORITHM or not isinstance(kid, str):
            raise _invalid("not signed by a coordinator")
        key = await self.keys.verifying_key(kid)
        if key is None:
            raise _invalid("its key is not this coordinators' own, or has rotated out")
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[ALGORITHM],
                audience=self.issuer,
                issuer=self.issuer,
                options={"verify_exp": False, "verify_iat": False, "verify_nbf": False},
            )
        except PyJWTError as exc:
            raise _invalid(f"it does not verify ({type(exc).__name__})") from None
        if float(claims.get("exp", 0)) <= self._clock.wall():
            raise _invalid("it has expired")
        try:
            return _chain_of(claims)
        except (KeyError, TypeError, ValueError):
            raise _invalid("its claims are not a chain") from None


def principal_of(chain: Chain) -> Principal:
    """Who a delegated call acts as: the original caller, through `chain`."""
    caller = chain.caller
    return Principal(
        caller.key_id, caller.name, caller.domain, caller.role, caller.capabilities, chain
    )


def delegation_record(chain: Chain) -> dict[str, Any]:
    """What records of a delegated call say of it (journal, decisions): on whose behalf,
    the agents it came through (oldest first; the last one made the call) and the
    principal of the agent that made it."""
    return {
        "on_behalf_of": chain.caller.name,
        "via": [
            {"agent": link.principal, "instance": link.instance, "capability": link.capability}
            for link in chain.links
        ],
        "by": chain.holder.principal,
    }


def _link_claim(link: Link) -> dict[str, Any]:
    return {
        "sub": link.principal,
        "instance": link.instance,
        "cap": link.capability,
        "role": link.role,
        "domain": link.domain,
    }


def _act_claim(links: tuple[Link, ...]) -> dict[str, Any] | None:
    act: dict[str, Any] | None = None
    for link in links:  # oldest first: each newer one wraps the older
        claim = _link_claim(link)
        if act is not None:
            claim["act"] = act
        act = claim
    return act


def _link_of(claim: dict[str, Any]) -> Link:
    role = claim["role"]
    if role not in ROLES:
        raise ValueError(role)
    return Link(
        str(claim["sub"]),
        None if claim.get("domain") is None else str(claim["domain"]),
        role,
        str(claim["instance"]),
        str(claim["cap"]),
    )


def _chain_of(claims: dict[str, Any]) -> Chain:
    links = [_link_of(claims["may_act"])]
    act = claims.get("act")
    while act is not None:
        links.append(_link_of(act))
        act = act.get("act")
    caller = claims["caller"]
    if caller["role"] not in ROLES:
        raise ValueError(caller["role"])
    principal = Principal(
        str(caller["key"]),
        str(claims["sub"]),
        None if caller.get("domain") is None else str(caller["domain"]),
        caller["role"],
        tuple(str(g) for g in caller["grants"]),
    )
    budget = claims.get("budget")
    return Chain(
        caller=principal,
        links=tuple(reversed(links)),
        root=str(claims["root"]),
        scope=tuple(str(claims["scope"]).split()),
        context_id=None if claims.get("ctx") is None else str(claims["ctx"]),
        hop=int(claims["hop"]),
        budget=None if budget is None else float(budget),
        expires_at=float(claims["exp"]),
    )


def _invalid(why: str) -> Unauthorized:
    return Unauthorized(f"the delegation token is not valid: {why}", code="delegation_invalid")
