"""The access gate: the one place that answers whether a caller may use a capability.

Its answers, in the order they are asked, each refused with the error that names why:

- `authorize_request`, before anything is done (a refused request leaves nothing
  behind, not even a dead letter): the role (observers never invoke), the named
  capability (the key's grants and the access rules; for a delegated call also the
  chain's boundary — the delegate rules, its depth, cycles, its holder's kill switch —
  as 403 `delegation_denied` naming what `failed`), and a delegated call's context (it
  may pass on only the one its token carries); then `authorize_context`: the caller
  must be allowed to use the context (404). A delegated request runs within the hops
  and the deadline its chain has left; a task run later (`within_chain`) is not run at
  all once its chain's deadline has passed: 504 `delegation_expired`;
- `admit_routed`, once routed: the routed capability where it was not known before or
  may have changed since (text, a task run later, a 421 redirect), then the quotas —
  the caller's own buckets and, for a delegated call, apart, those of the agent that
  handed it on.

The same answers serve every other way in, asked of this gate rather than of the
security service: `authorize` for a capability named outside `/v1/invoke` (`/v1/route`,
feedback, workflow runs), `may_invoke` for what is listed without a refusal (the A2A
and MCP faces' catalog), and `routable` for what a text is routed among (on
`/v1/invoke`, its 421 redirects and fan-out parts, and `/v1/route`).

The decisions themselves live below: roles, grants and quotas in the security service,
the delegation boundary in the mesh (given to the security service at construction),
context ownership in the context service.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable

from agent_reach.clock import Clock
from agent_reach.context.service import ContextService
from agent_reach.invoke.tasks import TaskEntry
from agent_reach.mesh.service import Mesh, chain_expired, delegated_limits, holder_principal
from agent_reach.model.keys import Principal
from agent_reach.routing.service import Allowed
from agent_reach.security.ownership import require_not_observer
from agent_reach.security.service import SecurityService


class AccessGate:
    """Roles, grants, delegation rules, kill switch, contexts and quotas of one request."""

    def __init__(self, security: SecurityService, contexts: ContextService, clock: Clock) -> None:
        self.security = security
        self.contexts = contexts
        self.clock = clock

    def authorize_request(self, task: TaskEntry) -> TaskEntry:
        """`Forbidden` unless the task's principal may make its request; the task within
        what its chain has left when it is delegated. Its context is `authorize_context`'s."""
        principal, request = task.principal, task.request
        require_not_observer(principal, "invoke")
        if request.capability is not None:
            self.security.authorize_invoke(principal, request.capability)
        chain = principal.chain
        if chain is None:
            return task
        if request.context_id is not None:
            Mesh.check_context(principal, request.context_id)
        hops, deadline_ms = delegated_limits(
            chain, task.hop_budget, task.deadline_ms, self.clock.wall()
        )
        return dataclasses.replace(task, hop_budget=hops, deadline_ms=deadline_ms)

    def authorize_context(self, principal: Principal, context_id: str) -> Awaitable[None]:
        """404 unless `principal` may use the context (refused before anything is
        delivered)."""
        return self.contexts.check_use(principal, context_id)

    def within_chain(self, task: TaskEntry) -> TaskEntry:
        """A task run later, with the hops and deadline its chain has left now (a parked
        request waited); `DelegationExpired` once nothing is left."""
        chain = task.principal.chain
        if chain is None:
            return task
        now = self.clock.wall()
        if now >= chain.expires_at:
            raise chain_expired(chain.expires_at)
        hops, deadline_ms = delegated_limits(chain, task.hop_budget, task.deadline_ms, now)
        return dataclasses.replace(task, hop_budget=hops, deadline_ms=deadline_ms)

    def authorize(self, principal: Principal, capability: str) -> None:
        """`Forbidden` unless `principal` may invoke (or route to) `capability`: its
        grants and the access rules; for a delegated call also its chain's boundary."""
        self.security.authorize_invoke(principal, capability)

    def may_invoke(self, principal: Principal, capability: str) -> bool:
        """Whether `authorize` would let the call through, decided the same way (the
        chain's boundary included) but without raising, logging or recording anything."""
        return self.security.may_invoke(principal, capability)

    def routable(self, principal: Principal) -> Allowed | None:
        """What a text of `principal`'s may be routed to: the capabilities it may invoke;
        None when that is every one (an admin acting on its own, or keys off)."""
        if principal.chain is None and principal.role == "admin":
            return None
        may_invoke = self.security.may_invoke
        return lambda capability: may_invoke(principal, capability)

    def admit_routed(
        self, principal: Principal, capability: str, *, checked: bool
    ) -> Awaitable[None]:
        """The routed capability (unless `checked` by `authorize_request` already), then
        a token from every quota bucket covering the call; `QuotaExceeded` when one is
        empty (the quotas' awaitable: one coroutine less per request)."""
        if not checked:
            self.security.authorize_invoke(principal, capability)
        chain = principal.chain
        if chain is None:
            return self.security.admit(principal, capability)
        holder = holder_principal(chain.holder)
        return self.security.admit(principal.on_its_own(), capability, holder)
