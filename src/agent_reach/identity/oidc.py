"""Bearer tokens from the organisation's IdP (OIDC / JWT access tokens).

A token is checked in this order, each failure a 401 with its own code:
`token_malformed` (not a compact JWS, or claims that cannot name a principal),
`token_issuer` (an issuer not in `AR_OIDC_ISSUER`), `token_signature` (the key named
by `kid` is not in the issuer's key set, the header's `alg` is not the key's own — so
never `none`, never an HMAC keyed with a public key — or the signature is wrong),
`token_audience` (no `aud` is one of ours), `token_expired` / `token_not_yet_valid`
(`exp`, `nbf`, `iat` against the clock, with `AR_OIDC_LEEWAY_S`). PyJWT checks the
signature; the claims are checked here, on the coordinator's clock.

A verified token's principal is kept until the token expires, so a caller pays for
the signature once; a change of key set or of policy drops what was kept. At start,
each trusted issuer that no `[[identity.issuers]]` rule names is logged as a warning
(`issuer_without_rule`): its tokens get the safe defaults (no admin, namespaced names).
"""

from __future__ import annotations

import math
import ssl
from collections.abc import Callable
from typing import Any

import jwt
import structlog
from jwt import PyJWK
from jwt.exceptions import InvalidAlgorithmError, InvalidSignatureError, PyJWTError

from agent_reach.backends.bundle import Backends
from agent_reach.clock import Clock
from agent_reach.config import Settings
from agent_reach.errors import Unauthorized
from agent_reach.identity.claims import (
    ROLES_WITHOUT_RULE,
    ClaimNames,
    principal_of_claims,
    principal_prefix,
)
from agent_reach.identity.jwks import KeySets
from agent_reach.model.keys import Principal
from agent_reach.policy.policy import Policy

log = structlog.get_logger("agent_reach.identity")

VERIFIED_MAX = 10_000  # distinct tokens whose principal is kept; more flush the cache

_Kept = tuple[Principal, float]  # the principal and the token's exp (wall clock)


def looks_like_jwt(credential: str) -> bool:
    """A compact JWS (`header.payload.signature`, the header a JSON object) rather than
    an API key: API keys hold no dots."""
    return credential.count(".") == 2 and credential.startswith("eyJ")


class OidcVerifier:
    """Verifies IdP tokens and maps their claims to principals (under the policy in force)."""

    def __init__(
        self,
        settings: Settings,
        keysets: KeySets,
        policy: Callable[[], Policy],
        clock: Clock,
    ) -> None:
        self.keysets = keysets
        self.audiences = frozenset(settings.oidc_audience)
        self.names = ClaimNames(
            settings.oidc_principal_claim,
            settings.oidc_role_claim,
            settings.oidc_grants_claim,
            settings.oidc_domain_claim,
        )
        self.leeway_s = settings.oidc_leeway_s
        self._policy = policy
        self._clock = clock
        self._kept: dict[tuple[str, str | None], _Kept] = {}
        self._kept_under: tuple[Policy, int] | None = None

    def kept(self, token: str, resource: str | None = None) -> Principal | None:
        """The principal of a token verified before and not yet expired; None otherwise."""
        self._check_kept()
        kept = self._kept.get((token, resource))
        if kept is None or kept[1] + self.leeway_s <= self._clock.wall():
            return None
        return kept[0]

    async def verify(self, token: str, resource: str | None = None) -> Principal:
        """The principal of a valid token; `Unauthorized` (401, `token_*`) or `Forbidden`
        (403, `role_not_allowed`) otherwise. `resource`: a further audience accepted
        (the MCP face's own URL, RFC 8707)."""
        principal = self.kept(token, resource)
        if principal is not None:
            return principal
        header, issuer = _peek(token)
        if issuer not in self.keysets.issuers:
            raise Unauthorized(
                f"tokens of issuer {issuer!r} are not accepted here", code="token_issuer"
            )
        kid = header.get("kid")
        key = self.keysets.held(issuer, kid) or await self.keysets.key(issuer, kid)
        if key is None:
            failure = self.keysets.failure(issuer)
            if failure is not None:
                raise Unauthorized(
                    f"the token's key {kid!r} is not among the issuer's keys held here: "
                    f"they could not be fetched ({failure})",
                    code="token_signature",
                )
            raise Unauthorized(
                f"the issuer has no key {kid!r} (rotated out, or never its own)",
                code="token_signature",
            )
        claims = _verified_claims(token, key, header.get("alg"))
        self._check_claims(claims, issuer, resource)
        principal = principal_of_claims(claims, issuer, self.names, self._policy().identity)
        self._check_kept()
        if len(self._kept) >= VERIFIED_MAX:
            self._kept.clear()
        self._kept[(token, resource)] = (principal, float(claims["exp"]))
        return principal

    def status(self) -> list[dict[str, Any]]:
        """Each trusted issuer: whether a policy rule names it, the prefix its principals
        get, and what this coordinator holds of its keys (`GET /v1/policy`)."""
        identity = self._policy().identity
        shown = []
        for issuer in self.keysets.issuers:
            rule = identity.issuer_rule(issuer)
            shown.append(
                {
                    "issuer": issuer,
                    "rule": None if rule is None else rule.issuer,
                    "roles": list(rule.roles if rule is not None else ROLES_WITHOUT_RULE),
                    "principal_prefix": principal_prefix(issuer, rule),
                    **self.keysets.status(issuer),
                }
            )
        return shown

    def warn_unruled(self) -> None:
        """Log each trusted issuer no `[[identity.issuers]]` rule names."""
        identity = self._policy().identity
        for issuer in self.keysets.issuers:
            if identity.issuer_rule(issuer) is None:
                log.warning(
                    "issuer_without_rule",
                    issuer=issuer,
                    principal_prefix=principal_prefix(issuer, None),
                    message="no [[identity.issuers]] rule names this issuer: its tokens may "
                    "not be admin and their principals are namespaced; a rule decides both",
                )

    def _check_claims(self, claims: dict[str, Any], issuer: str, resource: str | None) -> None:
        if claims.get("iss") != issuer:  # the peeked issuer is the signed one; kept explicit
            raise Unauthorized(
                "the token's issuer changed under its signature", code="token_issuer"
            )
        audience = claims.get("aud")
        held = [audience] if isinstance(audience, str) else audience
        accepted = self.audiences | ({resource} if resource else set())
        if not isinstance(held, list) or not accepted.intersection(
            a for a in held if isinstance(a, str)
        ):
            raise Unauthorized(
                f"the token is not for this service (audience {audience!r})", code="token_audience"
            )
        now, leeway = self._clock.wall(), self.leeway_s
        expires = _instant(claims, "exp", required=True)
        if expires is not None and expires + leeway <= now:
            raise Unauthorized("the token has expired", code="token_expired")
        for name in ("nbf", "iat"):
            instant = _instant(claims, name, required=False)
            if instant is not None and instant - leeway > now:
                raise Unauthorized(
                    f"the token is not valid yet ({name} is in the future)",
                    code="token_not_yet_valid",
                )

    def _check_kept(self) -> None:
        """Forget kept principals once the policy or any issuer's keys have changed."""
        under = (self._policy(), self.keysets.generation)
        if (
            self._kept_under is None
            or under[0] is not self._kept_under[0]
            or (under[1] != self._kept_under[1])
        ):
            self._kept.clear()
            self._kept_under = under


def _peek(token: str) -> tuple[dict[str, Any], str]:
    """The header and the claimed issuer, before anything is trusted."""
    try:
        header = jwt.get_unverified_header(token)
        claims = jwt.decode(token, options={"verify_signature": False})
    except PyJWTError:
        raise Unauthorized(
            "the bearer token is not a well-formed JWT", code="token_malformed"
        ) from None
    issuer = claims.get("iss")
    if not isinstance(issuer, str):
        raise Unauthorized("the token names no issuer (iss)", code="token_malformed")
    return header, issuer


def _verified_claims(token: str, key: PyJWK, alg: object) -> dict[str, Any]:
    """The claims once the signature checks out with `key` under the key's own algorithm."""
    if alg != key.algorithm_name:
        raise Unauthorized(
            f"the token's algorithm {alg!r} is not its key's ({key.algorithm_name})",
            code="token_signature",
        )
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key=key,
            algorithms=[key.algorithm_name],
            options={
                "verify_exp": False,
                "verify_nbf": False,
                "verify_iat": False,
                "verify_aud": False,
                "verify_iss": False,
            },
        )
    except (InvalidSignatureError, InvalidAlgorithmError):
        raise Unauthorized(
            "the token's signature does not verify", code="token_signature"
        ) from None
    except PyJWTError:
        raise Unauthorized(
            "the bearer token is not a well-formed JWT", code="token_malformed"
        ) from None
    return claims


def _instant(claims: dict[str, Any], name: str, *, required: bool) -> float | None:
    value = claims.get(name)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise Unauthorized(f"the token's {name!r} claim is not a time", code="token_malformed")
    return float(value)


def open_oidc(
    settings: Settings, backends: Backends, policy: Callable[[], Policy], clock: Clock
) -> OidcVerifier | None:
    """The verifier of `AR_OIDC_ISSUER`'s tokens; None when no issuer is trusted."""
    if not settings.oidc_issuer:
        return None
    verify: ssl.SSLContext | bool = True
    if settings.oidc_ca_file is not None:
        verify = ssl.create_default_context(cafile=str(settings.oidc_ca_file))
    keysets = KeySets(
        settings.oidc_issuer,
        backends.keysets,
        clock,
        ttl_s=settings.oidc_jwks_ttl_s,
        refresh_s=settings.oidc_jwks_refresh_s,
        timeout_s=settings.oidc_timeout_s,
        verify=verify,
    )
    verifier = OidcVerifier(settings, keysets, policy, clock)
    verifier.warn_unruled()
    return verifier
