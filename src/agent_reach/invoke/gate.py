"""The access gate: the one place the invoke path asks whether a caller may do this.

Its answers, in the order they are asked, each refused with the error that names why:

- `enter`, before anything is done (a refused request leaves nothing behind, not even a
  dead letter): the role (observers never invoke), the named capability (the key's
  grants and the access rules; for a delegated call also the chain's boundary — the
  delegate rules, its depth, cycles, its holder's kill switch — as 403
  `delegation_denied` naming what `failed`), then the context (a delegated call may
  pass on only the context its token carries; the caller must be allowed to use it);
- `admit`, once routed: the routed capability where it was not known before or may
  have changed since (text, a task run later, a 421 redirect), then the quotas — the
  caller's own buckets and, for a delegated call, apart, those of the agent that
  handed it on.

The decisions themselves live below: roles, grants and quotas in the security service,
the delegation boundary in the mesh (given to the security service at construction),
context ownership in the context service.
"""

from __future__ import annotations

from agent_reach.context.service import ContextService
from agent_reach.mesh.service import Mesh, holder_principal
from agent_reach.model.invocations import InvokeRequest
from agent_reach.model.keys import Principal
from agent_reach.security.ownership import require_not_observer
from agent_reach.security.service import SecurityService


class AccessGate:
    """Roles, grants, delegation rules, kill switch, contexts and quotas of one request."""

    def __init__(self, security: SecurityService, contexts: ContextService) -> None:
        self.security = security
        self.contexts = contexts

    async def enter(self, principal: Principal, request: InvokeRequest) -> None:
        """`Forbidden` (or the context's 404) unless `principal` may make `request`."""
        require_not_observer(principal, "invoke")
        if request.capability is not None:
            self.security.authorize_invoke(principal, request.capability)
        if request.context_id is not None:  # refused (404) before anything is delivered
            if principal.chain is not None:
                Mesh.check_context(principal, request.context_id)
            await self.contexts.check_use(principal, request.context_id)

    def authorize(self, principal: Principal, capability: str) -> None:
        """`Forbidden` unless `principal` may invoke (or route to) `capability`."""
        self.security.authorize_invoke(principal, capability)

    async def admit(self, principal: Principal, capability: str, *, checked: bool) -> None:
        """The routed capability (unless `checked` at `enter` already), then a token from
        every quota bucket covering the call; `QuotaExceeded` when one is empty."""
        if not checked:
            self.security.authorize_invoke(principal, capability)
        chain = principal.chain
        if chain is None:
            await self.security.admit(principal, capability)
            return
        await self.security.admit(principal.on_its_own(), capability)
        await self.security.admit(holder_principal(chain.holder), capability)
