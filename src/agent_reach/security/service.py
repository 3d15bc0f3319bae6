"""The security service: authenticate a key, authorize an action, admit under quota.

Keys are looked up by id and verified against their digest in constant time; a
verified record is cached for at most `KEY_CACHE_S`, so a revocation reaches every
coordinator within that time. A key's own grants decide first; the access rules and
quotas of the policy in force (hot-reloaded) apply on top. With `AR_AUTH=off` every
caller is an anonymous admin: for a local demo only, and the coordinator says so loudly
at startup.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any, Protocol

import structlog

from agent_reach.backends.bundle import Backends
from agent_reach.backends.protocols import KeyStore, QuotaStore
from agent_reach.clock import Clock
from agent_reach.config import Settings
from agent_reach.errors import Forbidden, InvalidRequest, QuotaExceeded, ReachError, Unauthorized
from agent_reach.identity.certificates import PeerCertificate, certificate_principal
from agent_reach.identity.oidc import OidcVerifier, looks_like_jwt, open_oidc
from agent_reach.identity.origins import OriginGuard
from agent_reach.model.access import AccessRule
from agent_reach.model.agents import TransportSpec
from agent_reach.model.keys import ANONYMOUS, KeyRecord, Principal
from agent_reach.observability.metrics import Metrics
from agent_reach.policy.policy import Policy
from agent_reach.security.access import (
    AccessDecision,
    Action,
    capability_matches,
    decide_access,
    deny,
    principal_matches,
)
from agent_reach.security.endpoints import EndpointGuard
from agent_reach.security.keys import bootstrap_record, digest, matches, split_key
from agent_reach.security.ownership import require_observer

log = structlog.get_logger("agent_reach.security")

KEY_CACHE_S = 1.0  # issue 6: a revocation is effective on every coordinator within 1 s
KEY_CACHE_MAX = 10_000  # distinct key ids cached; more flush the cache
RULES_CACHE_MAX = 10_000  # (principal, capability) pairs whose rules are kept per policy
_SAME_ANSWER = "a valid API key is required (Authorization: Bearer <key>)"
_NO_CERTIFICATE_MAPPING = (
    "the client certificate maps to no principal ([[identity.certificates]] in the "
    "policy); send a credential (Authorization: Bearer <key>)"
)

_Cached = tuple[KeyRecord | None, Principal, float]


class Delegations(Protocol):
    """The delegation boundary (the mesh provides it): who a delegation token lets its
    holder act as, and whether a call through a chain may reach a capability."""

    def recognizes(self, credential: str) -> bool: ...

    async def principal_of(self, token: str) -> Principal: ...

    def check(self, principal: Principal, capability: str) -> None: ...

    def refusal(self, principal: Principal, capability: str) -> ReachError | None: ...


class SecurityService:
    """Answers "who is this" and "may they" for the server's routes and the fast path."""

    def __init__(
        self,
        keys: KeyStore,
        quotas: QuotaStore,
        policy: Callable[[], Policy],
        clock: Clock,
        metrics: Metrics,
        *,
        enabled: bool,
        guard: EndpointGuard,
        metrics_digest: str | None = None,
        origins: OriginGuard,
        tokens: OidcVerifier | None = None,
        delegations: Delegations | None = None,
    ) -> None:
        self.guard = guard
        self.origins = origins
        self.delegations = delegations
        self.tokens = tokens
        self._metrics_digest = metrics_digest
        self.keys = keys
        self.quotas = quotas
        self.policy = policy
        self.clock = clock
        self.metrics = metrics
        self.enabled = enabled
        # key id -> its record, the principal it stands for (made once, not per request)
        # and when the record was read
        self._cache: dict[str, _Cached] = {}
        # What the policy in force says per (principal, capability), worked out once per
        # policy: the invoke verdict and the quota buckets (index, scope, rate, burst).
        self._rules_of: Policy | None = None
        self._verdicts: dict[tuple[Principal, str], AccessDecision] = {}
        self._buckets: dict[tuple[Principal, str], list[tuple[str, float, int]]] = {}

    async def authenticate(
        self,
        authorization: str | None,
        peer: PeerCertificate | None = None,
        *,
        resource: str | None = None,
    ) -> Principal:
        """The principal of a `Bearer` API key or IdP token; `Unauthorized` (the same
        answer) for any bad key, a `token_*` code for a bad token. `resource`: the MCP
        face's URL, an audience its tokens may carry."""
        principal = self.authenticate_cached(authorization, peer, resource=resource)
        if principal is not None:
            return principal
        credential = _bearer(authorization)
        if looks_like_jwt(credential):
            delegations = self.delegations
            if delegations is not None and delegations.recognizes(credential):
                return await delegations.principal_of(credential)
            if self.tokens is not None:
                return await self.tokens.verify(credential, resource)
        key_id, secret = split_key(credential)
        return _verified(await self._fetch(key_id), secret)

    def authenticate_cached(
        self,
        authorization: str | None,
        peer: PeerCertificate | None = None,
        *,
        resource: str | None = None,
    ) -> Principal | None:
        """`authenticate` without waiting: None when the key's record (or the token's
        key set) must be read first; the same answers otherwise. Without Authorization,
        `peer` (a client certificate the handshake verified) is the credential."""
        if not self.enabled:
            # A delegation token is honored with security off too: a chain only narrows.
            if self.delegations is not None and self._carries_delegation(authorization):
                return None
            return ANONYMOUS
        if authorization is None and peer is not None:
            principal = certificate_principal(self.policy().identity, peer)
            if principal is None:
                raise Unauthorized(_NO_CERTIFICATE_MAPPING)
            return principal
        credential = _bearer(authorization)
        if looks_like_jwt(credential) and (self.tokens is not None or self.delegations is not None):
            delegations = self.delegations
            if self.tokens is None or (
                delegations is not None and delegations.recognizes(credential)
            ):
                return None  # a delegation token is verified each time it is used
            return self.tokens.kept(credential, resource)
        key_id, secret = split_key(credential)
        cached = self._cache.get(key_id)
        if cached is None or self.clock.monotonic() - cached[2] >= KEY_CACHE_S:
            return None
        return _verified(cached, secret)

    async def authorize_scrape(self, authorization: str | None) -> None:
        """`/metrics`: the `AR_METRICS_TOKEN` bearer (compared in constant time), else an
        observer or admin key; 401 for no valid credential, 403 for another role's key."""
        if not self.enabled:
            return
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        if (
            self._metrics_digest is not None
            and scheme.lower() == "bearer"
            and hmac.compare_digest(digest(token), self._metrics_digest)
        ):
            return
        require_observer(await self.authenticate(authorization))

    def authorize_invoke(self, principal: Principal, capability: str) -> None:
        """`Forbidden` unless the key's grant or a rule lets the principal invoke (or route
        to) the capability; observers never may."""
        if principal.chain is not None:
            self._authorize_delegated(principal, capability)
            return
        if principal.role == "admin":  # every anonymous caller too, with security off
            return
        verdict = self._invoke_verdict(principal, capability)
        if not verdict.allowed:
            deny(verdict, principal, capability, "invoke")

    def may_invoke(self, principal: Principal, capability: str) -> bool:
        """Whether `authorize_invoke` would let the call through, decided the same way
        but without raising, logging or recording anything: what `/mcp` lists."""
        if principal.chain is not None:
            assert self.delegations is not None  # only the mesh makes chained principals
            if self.delegations.refusal(principal, capability) is not None:
                return False
            principal = principal.on_its_own()
        return principal.role == "admin" or self._invoke_verdict(principal, capability).allowed

    def _invoke_verdict(self, principal: Principal, capability: str) -> AccessDecision:
        """The access decision on invoking, worked out once per policy."""
        policy = self._rules()
        verdict = self._verdicts.get((principal, capability))
        if verdict is None:
            verdict = decide_access(policy.access.invoke, principal, capability, "invoke")
            self._verdicts[(principal, capability)] = verdict
        return verdict

    def _authorize_delegated(self, principal: Principal, capability: str) -> None:
        """A call through a delegation chain: the chain's boundary, and the original
        caller's own right — 403 `delegation_denied` naming what failed."""
        assert self.delegations is not None  # only the mesh makes chained principals
        self.delegations.check(principal, capability)
        try:
            self.authorize_invoke(principal.on_its_own(), capability)
        except Forbidden as exc:
            raise Forbidden(
                f"the delegation is denied: its caller may not invoke {capability!r}",
                code="delegation_denied",
                failed="caller",
            ) from exc

    def authorize_register(self, principal: Principal, capabilities: list[str]) -> None:
        """Agents (and admins) may register only what their key's grants or rules allow."""
        for capability in capabilities:
            self._authorize(self.policy().access.registration, principal, capability, "register")

    def may_use(self, principal: Principal, capability: str) -> bool:
        """Whether the key's grants or a rule let the principal invoke or register the
        capability: what of the registry it may see (`security/visibility.py`)."""
        access = self.policy().access
        return decide_access(access.invoke, principal, capability, "invoke").allowed or (
            decide_access(access.registration, principal, capability, "register").allowed
        )

    def authorize_owner(self, principal: Principal, owner: str | None, agent_id: str) -> None:
        """Only the principal that registered an instance (or an admin) may change it."""
        if principal.role == "admin" or owner == principal.name:
            return
        raise Forbidden(f"agent {agent_id!r} belongs to another principal")

    async def check_endpoints(self, transport: TransportSpec) -> None:
        """Refuse endpoints outside the allowed networks (checked again at every dial)."""
        await self.guard.check_url(transport.endpoint)
        if transport.health_endpoint:
            await self.guard.check_url(transport.health_endpoint, "health_endpoint")

    def identity_status(self) -> dict[str, Any]:
        """The trusted issuers as this coordinator sees them (`GET /v1/policy`)."""
        return {"issuers": [] if self.tokens is None else self.tokens.status()}

    async def aclose(self) -> None:
        """Close the IdP client, if tokens are accepted."""
        if self.tokens is not None:
            await self.tokens.keysets.aclose()

    def forget(self, key_id: str) -> None:
        """Drop a cached key record at once (this coordinator just revoked it)."""
        self._cache.pop(key_id, None)

    @staticmethod
    def require_admin(principal: Principal) -> None:
        if principal.role != "admin":
            raise Forbidden("this needs an admin key")

    async def admit(
        self, principal: Principal, capability: str, holder: Principal | None = None
    ) -> None:
        """Take a token from every bucket covering the pair; `QuotaExceeded` when one is
        empty. `principal` on its own; `holder`, for a delegated call, the agent that
        handed it on, whose buckets are taken from apart (`invoke/gate.py`)."""
        policy = self._rules()
        if not policy.quotas:
            return
        for payer in (principal,) if holder is None else (principal, holder):
            buckets = self._buckets.get((payer, capability))
            if buckets is None:
                buckets = self._buckets[(payer, capability)] = [
                    (
                        f"{index}:{payer.name}:{capability if rule.scope == 'pair' else '*'}",
                        rule.rate_per_s,
                        rule.burst,
                    )
                    for index, rule in enumerate(policy.quotas)
                    if _covers(rule.principals, rule.capabilities, payer, capability)
                ]
            for key, rate_per_s, burst in buckets:
                wait_s = await self.quotas.take(key, rate_per_s, burst)
                if wait_s > 0:
                    self.metrics.quota_denials.labels(capability).inc()
                    raise QuotaExceeded(
                        f"quota for {capability!r} used up; try again in {wait_s:.3f} s",
                        retry_after_s=round(wait_s, 3),
                    )

    def _carries_delegation(self, authorization: str | None) -> bool:
        """`Bearer <delegation token>`, without refusing anything else (security off)."""
        if authorization is None or self.delegations is None:
            return False
        scheme, _, credential = authorization.partition(" ")
        return scheme.lower() == "bearer" and self.delegations.recognizes(credential.strip())

    async def _fetch(self, key_id: str) -> _Cached:
        """The key's record read from the store now, and cached."""
        now = self.clock.monotonic()
        record = await self.keys.get(key_id)
        if len(self._cache) >= KEY_CACHE_MAX:
            self._cache.clear()
        previous = self._cache.get(key_id)
        if record is None:
            principal = ANONYMOUS  # no record: refused
        elif previous is not None and previous[0] == record:
            # the same principal object: the verdicts and buckets keyed by it are then
            # found by identity, without comparing every field of a new one
            principal = previous[1]
        else:
            principal = record.principal_of()
        cached = self._cache[key_id] = (record, principal, now)
        return cached

    def _rules(self) -> Policy:
        """The policy in force; the verdicts and buckets worked out under another are dropped."""
        policy = self.policy()
        if policy is not self._rules_of or len(self._verdicts) + len(self._buckets) > (
            RULES_CACHE_MAX
        ):
            self._rules_of = policy
            self._verdicts.clear()
            self._buckets.clear()
        return policy

    def _authorize(
        self, rules: list[AccessRule], principal: Principal, capability: str, action: Action
    ) -> None:
        decision = decide_access(rules, principal, capability, action)
        if not decision.allowed:
            deny(decision, principal, capability, action)


def _covers(
    principals: list[str], capabilities: list[str], principal: Principal, capability: str
) -> bool:
    return any(principal_matches(p, principal) for p in principals) and any(
        capability_matches(c, capability) for c in capabilities
    )


def _admin_key(settings: Settings) -> str | None:
    if settings.admin_key is not None:
        return settings.admin_key.get_secret_value()
    if settings.admin_key_file is None:
        return None
    try:
        return settings.admin_key_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise InvalidRequest(f"AR_ADMIN_KEY_FILE cannot be read: {exc.strerror}") from None


async def open_security(
    settings: Settings,
    backends: Backends,
    policy: Callable[[], Policy],
    clock: Clock,
    metrics: Metrics,
    delegations: Delegations | None = None,
) -> SecurityService:
    """The security service; stores the `AR_ADMIN_KEY` digest and forgets the key itself.
    `delegations`: the mesh, which verifies delegation tokens and chains."""
    enabled = settings.auth == "on"
    if not enabled:
        log.warning(
            "security_disabled",
            message="AR_AUTH=off: every caller is an anonymous admin; use this for a local "
            "demo only, never on a network",
        )
    metrics_token = settings.metrics_token
    settings.metrics_token = None  # like the admin key: only its digest stays
    admin_key = _admin_key(settings)
    if admin_key is not None:
        await backends.keys.put(bootstrap_record(admin_key, clock.wall()))
        settings.admin_key = None  # the digest is stored; the key leaves this process's memory
    elif enabled and not await backends.keys.list():
        log.warning("no_keys", message="security is on and no key exists: set AR_ADMIN_KEY")
    return SecurityService(
        backends.keys,
        backends.quotas,
        policy,
        clock,
        metrics,
        enabled=enabled,
        guard=EndpointGuard(settings.endpoint_allow),
        origins=OriginGuard(settings),
        metrics_digest=None if metrics_token is None else digest(metrics_token.get_secret_value()),
        tokens=open_oidc(settings, backends, policy, clock),
        delegations=delegations,
    )


def _bearer(authorization: str | None) -> str:
    """The credential of a `Bearer` header; `Unauthorized` for anything else."""
    scheme, _, credential = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        raise Unauthorized(_SAME_ANSWER)
    return credential.strip()


def _verified(cached: _Cached, secret: str) -> Principal:
    """The cached record's principal when `secret` is its key's; `Unauthorized` otherwise."""
    record, principal, _ = cached
    if record is None or record.revoked or not matches(record, secret):
        raise Unauthorized(_SAME_ANSWER)
    return principal
