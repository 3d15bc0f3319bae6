"""Delegation on behalf of a caller: what deliveries carry, and the boundary a
delegated call crosses.

A delivery to an agent that may hand work on (a `[[access.delegate]]` rule names it),
to any agent of a chain, or to one that asked at registration (`"delegation": true`)
carries `delegation: {"token", "expires_at", "depth"}`. The agent hands a sub-task on
by invoking with `Authorization: Bearer <token>` and nothing else; the coordinator
then acts as the original caller, through the chain, and the call may use a capability
only where all of these hold — a chain only narrows:

- the original caller may invoke it (its key's grants and the access rules);
- a delegate rule lets the agent holding the token hand it on (and the token's scope,
  fixed when it was issued, names it);
- the chain stays within `[delegation] max_depth`;
- the capability is not already in the chain (422 `delegation_cycle`; the holder has
  bounced its task, and the quality ledger counts it: mesh/quality.py);
- the holder is not disabled, and any context passed is the one the token carries.

Otherwise 403 `delegation_denied` naming what `failed`. Every delivery to an instance
that declares a `cost` spends it from the chain's budget (the root request's `budget`),
checked and added atomically in the shared store: 403 `budget_exhausted` before
delivery when it would overspend.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Protocol

from agent_reach.backends.bundle import Backends
from agent_reach.backends.protocols import MeshStore
from agent_reach.clock import Clock
from agent_reach.config import Settings
from agent_reach.errors import DelegationCycle, DelegationExpired, Forbidden, ReachError
from agent_reach.mesh.kill_switch import KillSwitch
from agent_reach.mesh.signing import SigningKeys
from agent_reach.mesh.tokens import DelegationTokens, is_delegation_token, principal_of
from agent_reach.model.access import AccessRule
from agent_reach.model.keys import Chain, Link, Principal
from agent_reach.model.quality import OutcomeKind
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import Instance, RegistryIndex
from agent_reach.security.access import capability_matches, principal_matches

DEFAULT_ISSUER = "urn:agent-reach"  # the tokens' iss and aud when AR_PUBLIC_URL is unset
BUDGET_TTL_S = 3600.0  # a chain's spent total outlives any request of it (the long class)
UNLIMITED = sys.float_info.max  # the limit of a spend that must be recorded whatever it costs
HOLDER_KEY_ID = "delegated"  # the key_id of a chain's agent as a principal (no key of its own)


class OutcomeLedger(Protocol):
    """The quality ledger (mesh/quality.py) as an observer: an agent's outcome counted."""

    def record(self, agent_id: str, kind: OutcomeKind) -> None: ...


class Mesh:
    """Tokens for deliveries, and the checks of delegated calls. `ledger` observes the
    chains that bounce a task back (`delegation_cycle`)."""

    def __init__(
        self,
        tokens: DelegationTokens,
        switch: KillSwitch,
        store: MeshStore,
        index: RegistryIndex,
        policy: Callable[[], Policy],
        clock: Clock,
        ledger: OutcomeLedger | None = None,
    ) -> None:
        self.tokens = tokens
        self.switch = switch
        self._store = store
        self._index = index
        self._asking: tuple[int, bool] = (-1, False)  # (index version, any spec asks)
        self._policy = policy
        self._clock = clock
        self._scopes: dict[tuple[str, str], tuple[str, ...]] = {}
        self._scopes_of: Policy | None = None
        self._ledger = ledger

    def involved(self, principal: Principal, budget: float | None) -> bool:
        """Whether a request's deliveries may carry a token or spend a budget: a chain, a
        budget, a delegate rule, or an agent that asked for tokens. Otherwise the
        delivery path does not look at the mesh at all."""
        if principal.chain is not None or budget is not None or self._policy().access.delegate:
            return True
        version, asking = self._asking
        if version != self._index.version:
            asking = any(i.spec.delegation for i in self._index.by_id.values())
            self._asking = (self._index.version, asking)
        return asking

    def carries_token(self, principal: Principal, instance: Instance) -> bool:
        """Whether deliveries of this request to `instance` carry a delegation token."""
        return (
            principal.chain is not None
            or instance.spec.delegation
            or bool(self._scope(holder_link(instance, "")))
        )

    async def delegation_for(
        self,
        principal: Principal,
        instance: Instance,
        capability: str,
        *,
        request_id: str,
        hop: int,
        deadline_s: float,
        context_id: str | None,
        budget: float | None,
    ) -> dict[str, Any]:
        """The `delegation` block of a delivery to `instance` (`deadline_s`: seconds left)."""
        link = holder_link(instance, capability)
        chain = principal.chain
        expires_at = self._clock.wall() + deadline_s
        if chain is not None:
            expires_at = min(expires_at, chain.expires_at)
        held = Chain(
            caller=principal.on_its_own(),
            links=(*chain.links, link) if chain is not None else (link,),
            root=chain.root if chain is not None else request_id,
            scope=self._scope(link),
            context_id=context_id,
            hop=hop,
            budget=chain.budget if chain is not None else budget,
            expires_at=expires_at,
        )
        key = self.tokens.keys.current() or await self.tokens.keys.signing_key()
        token = self.tokens.sign(held, request_id, key)
        return {"token": token, "expires_at": expires_at, "depth": held.depth}

    @staticmethod
    def recognizes(credential: str) -> bool:
        """Whether a bearer credential is a delegation token (verified by `principal_of`)."""
        return is_delegation_token(credential)

    async def principal_of(self, token: str) -> Principal:
        """Who a delegation token lets its holder act as: the caller, through the chain;
        401 `delegation_invalid` for a bad token, 403 when its holder is disabled."""
        chain = await self.tokens.verify(token)
        if self.switch.is_disabled(chain.holder.instance):
            raise _denied("agent_disabled", f"agent {chain.holder.instance!r} is disabled")
        return principal_of(chain)

    def check(self, principal: Principal, capability: str) -> None:
        """The delegation boundary of a call made through `principal.chain` (the caller's
        own right to invoke is checked beside it, by the security service)."""
        refused = self.refusal(principal, capability)
        if refused is None:
            return
        if isinstance(refused, DelegationCycle) and self._ledger is not None:
            assert principal.chain is not None  # a refusal needs a chain
            # handing the whole task back or sideways
            self._ledger.record(principal.chain.holder.instance, "bounced")
        raise refused

    def refusal(self, principal: Principal, capability: str) -> ReachError | None:
        """What `check` would raise for this call, or None; records nothing (the MCP face
        lists with it what a delegated caller may call)."""
        chain = principal.chain
        assert chain is not None  # only delegated calls cross it
        holder = chain.holder
        if self.switch.is_disabled(holder.instance):
            return _denied("agent_disabled", f"agent {holder.instance!r} is disabled")
        if any(link.capability == capability for link in chain.links):
            path = " -> ".join(link.capability for link in chain.links)
            return DelegationCycle(
                f"{capability!r} is already in this chain ({path}): handing it back is "
                "passing the buck",
                chain=[link.capability for link in chain.links],
            )
        max_depth = self._policy().delegation.max_depth
        if chain.depth >= max_depth:
            return _denied(
                "max_depth",
                f"the chain is {chain.depth} agents deep; the policy allows {max_depth}",
            )
        rule_allows = any(
            _covers(rule, holder_principal(holder), capability)
            for rule in self._policy().access.delegate
        )
        if not rule_allows or not any(capability_matches(p, capability) for p in chain.scope):
            return _denied(
                "delegate_rule",
                f"no [[access.delegate]] rule lets {holder.principal!r} hand {capability!r} on",
            )
        return None

    @staticmethod
    def check_context(principal: Principal, context_id: str) -> None:
        """A delegated call may pass on only the context its token carries."""
        chain = principal.chain
        if chain is not None and context_id != chain.context_id:
            raise _denied("context", f"the token does not carry context {context_id!r}")

    async def spend(
        self, principal: Principal, root: str, budget: float | None, cost: float
    ) -> None:
        """Spend `cost` from the chain's budget; 403 `budget_exhausted` when it would pass."""
        chain = principal.chain
        limit = chain.budget if chain is not None else budget
        # A delegated call is checked even when free: reported costs may have spent it all.
        if limit is None or (cost <= 0 and chain is None):
            return
        cost = max(cost, 0.0)
        spent = await self._store.spend(chain.root if chain else root, cost, limit, BUDGET_TTL_S)
        if spent is None:
            raise Forbidden(
                f"this delivery costs {cost:g} and the chain's budget of {limit:g} would be passed",
                code="budget_exhausted",
                budget=limit,
                cost=cost,
            )

    async def spend_reported(
        self, principal: Principal, root: str, budget: float | None, extra: float
    ) -> None:
        """Add what an agent reported over its declared cost (`X-Reach-Cost`) to the
        chain's spent total, past the budget if so: the work is done, and the chain's
        next delegation is then refused (`budget_exhausted`)."""
        chain = principal.chain
        limit = chain.budget if chain is not None else budget
        if limit is None or extra <= 0:
            return
        await self._store.spend(chain.root if chain else root, extra, UNLIMITED, BUDGET_TTL_S)

    def _scope(self, link: Link) -> tuple[str, ...]:
        """The capability patterns the delegate rules let this agent hand on."""
        policy = self._policy()
        if policy is not self._scopes_of:
            self._scopes_of, self._scopes = policy, {}
        key = (link.principal, link.domain or "")
        scope = self._scopes.get(key)
        if scope is None:
            holder = holder_principal(link)
            patterns = [
                c
                for rule in policy.access.delegate
                if any(principal_matches(p, holder) for p in rule.principals)
                for c in rule.capabilities
            ]
            scope = self._scopes[key] = tuple(dict.fromkeys(patterns))
        return scope


def holder_link(instance: Instance, capability: str) -> Link:
    """The agent an instance stands for in a chain: its owner principal, as an agent."""
    owner = instance.record.owner or instance.id
    return Link(owner, instance.spec.domain, "agent", instance.id, capability)


def holder_principal(link: Link) -> Principal:
    """A chain's agent as a principal (for delegate rules and its own quotas)."""
    return Principal(HOLDER_KEY_ID, link.principal, link.domain, link.role)


def delegated_limits(
    chain: Chain, hops: int, deadline_ms: int | None, now: float
) -> tuple[int, int]:
    """A delegated call's hop budget and deadline: never beyond what its token left."""
    left_ms = max(0, int((chain.expires_at - now) * 1000))
    return min(hops, chain.hop), left_ms if deadline_ms is None else min(deadline_ms, left_ms)


def chain_expired(expired_at: float) -> DelegationExpired:
    """The error of a delegated request that waited past its chain's deadline."""
    return DelegationExpired(
        "the delegation chain's deadline passed while the request waited (parked): it "
        "was not delivered",
        expired_at=expired_at,
    )


def _covers(rule: AccessRule, principal: Principal, capability: str) -> bool:
    return any(principal_matches(p, principal) for p in rule.principals) and any(
        capability_matches(c, capability) for c in rule.capabilities
    )


def _denied(failed: str, message: str) -> Forbidden:
    return Forbidden(
        f"the delegation is denied: {message}", code="delegation_denied", failed=failed
    )


def open_mesh(
    settings: Settings,
    backends: Backends,
    index: RegistryIndex,
    policy: Callable[[], Policy],
    clock: Clock,
    ledger: OutcomeLedger | None = None,
) -> Mesh:
    """The mesh of one coordinator: keys and kill switch shared through `backends`."""
    keys = SigningKeys(backends.keysets, clock, settings.delegation_rotate_s)
    issuer = settings.public_url.rstrip("/") if settings.public_url else DEFAULT_ISSUER
    switch = KillSwitch(backends.mesh, index, clock)
    tokens = DelegationTokens(keys, issuer, clock)
    return Mesh(tokens, switch, backends.mesh, index, policy, clock, ledger)
