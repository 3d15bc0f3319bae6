"""What a request must pass between routing and delivery, and its hop budget.

Pure functions of the request, its decision, the registry index and the policy in
force: none waits, none records anything.
"""

from __future__ import annotations

from typing import Any

from agent_reach.errors import Ambiguous, NoCapability, NoInstance, NoMatch
from agent_reach.invoke.schemas import PayloadSchemas, spec_schema
from agent_reach.model.decisions import RouteDecision
from agent_reach.model.invocations import DEFAULT_MAX_HOP, InvokeRequest
from agent_reach.registry.index import RegistryIndex


def check_routable(
    decision: RouteDecision, request: InvokeRequest, request_id: str, index: RegistryIndex
) -> None:
    """Nothing to deliver to: the error that says why (no instance, ambiguous, no match)."""
    if decision.agent_id is not None:
        return
    details: dict[str, Any] = {"request_id": request_id, "route": decision}
    if decision.rule == "no_instance":
        message = _no_instance_message(index, decision.capability or request.capability)
        raise NoInstance(message, retry_after_s=1, **details)
    if decision.rule == "margin":
        raise Ambiguous("the text fits several capabilities too equally to choose", **details)
    if request.capability is None:
        raise NoMatch("the text fits no registered capability well enough", **details)
    raise no_capability(request.capability, **details)


def _no_instance_message(index: RegistryIndex, capability: str | None) -> str:
    """Why no instance serves: the kill switch named when it holds them all out."""
    instances = index.instances_of(capability) if capability is not None else []
    disabled = [i.id for i in instances if i.disabled]
    if disabled and len(disabled) == len(instances):
        return (
            f"every instance of {capability!r} is disabled by an admin (kill switch): "
            f"{', '.join(sorted(disabled))}"
        )
    return "no live instance offers the capability right now"


def no_capability(capability: str, **details: Any) -> NoCapability:
    """404 `no_capability`, naming the capability that nobody registered."""
    return NoCapability(
        f"no registered agent offers the capability {capability!r}: register an agent "
        "for it, or check its name (GET /v1/capabilities lists the registered ones)",
        capability=capability,
        **details,
    )


def check_payload(
    schemas: PayloadSchemas, index: RegistryIndex, decision: RouteDecision, request: InvokeRequest
) -> None:
    """422 before any delivery when the payload breaks the capability's `input_schema`.

    A text request without a payload is not checked: its words are the input.
    """
    instance = index.by_id.get(decision.agent_id or "")
    if instance is None or decision.capability is None:
        return
    if request.payload is None and request.capability is None:
        return
    schema = spec_schema(instance.spec, decision.capability)
    if schema is not None:
        schemas.check(schema, request.payload, decision.capability)


def hop_budget(from_header: int | None, from_body: int | None) -> int:
    """The smaller of the budget an agent passed on and the one the body asks for."""
    if from_header is None:
        return DEFAULT_MAX_HOP if from_body is None else from_body
    return from_header if from_body is None else min(from_header, from_body)
