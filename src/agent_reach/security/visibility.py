"""What of the registry a key may see (`GET /v1/agents`, `/v1/capabilities`).

Least privilege: an admin sees everything, and a principal everything of the instances
it registered. An observer sees every instance and where it is reached (transport type
and endpoints) but not an adapter's templates, whose headers may carry a legacy
system's credentials. A caller or agent key sees only the capabilities it may invoke or
register, and the instances offering them, without their transport: callers reach an
agent through the coordinator, never around its access rules.
"""

from __future__ import annotations

from collections.abc import Callable

from agent_reach.model.agents import InstanceView, TransportSpec
from agent_reach.model.keys import Principal

MayUse = Callable[[Principal, str], bool]


def visible_view(
    view: InstanceView, owner: str | None, principal: Principal, may_use: MayUse
) -> InstanceView | None:
    """The instance as this principal may see it; None when it may not see it at all."""
    if principal.role == "admin" or owner == principal.name:
        return view
    transport = view.transport
    if principal.role == "observer":
        if transport is None or not transport.model_extra:
            return view
        plain = TransportSpec(
            type=transport.type,
            endpoint=transport.endpoint,
            health_endpoint=transport.health_endpoint,
        )
        return view.model_copy(update={"transport": plain})
    capabilities = [c for c in view.capabilities if may_use(principal, c)]
    if not capabilities:
        return None
    return view.model_copy(update={"capabilities": capabilities, "transport": None})


def visible_capabilities(
    capabilities: dict[str, list[str]], principal: Principal, may_use: MayUse
) -> dict[str, list[str]]:
    """Capability -> live instance ids, only the capabilities the principal may use."""
    if principal.role in ("admin", "observer"):
        return capabilities
    return {tag: ids for tag, ids in capabilities.items() if may_use(principal, tag)}
