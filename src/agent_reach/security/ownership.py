"""Who may see or touch a resource: the checks every surface shares (least privilege).

Resources that belong to a principal — contexts, tasks, workflow runs, the requests
behind decisions, traces and feedback — record its name as their owner. The rules:

- an **admin** may do anything;
- an **observer** may read (never change) every observability record: decisions,
  traces, queues, dead letters, the policy, metrics, events;
- anyone else may use what it owns, and what its owner shared with it by name or by
  domain (`share_with: ["cs-bot", "domain:warehouse"]`), and sees only its own records.

A resource the principal may not use is answered like one that does not exist (404),
so its existence does not leak; an action a role may never take is 403.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent_reach.errors import Forbidden
from agent_reach.model.keys import Principal

DOMAIN_SHARE = "domain:"  # a share_with entry naming every principal of a domain
OBSERVER_NEEDED = (
    "this shows every principal's traffic: it needs an observer or admin key "
    "(agent-reach keys create --principal <name> --role observer)"
)


def is_admin(principal: Principal) -> bool:
    return principal.role == "admin"


def is_observer(principal: Principal) -> bool:
    """May read every observability record: observers and admins."""
    return principal.role in ("observer", "admin")


def require_observer(principal: Principal) -> None:
    """403 `forbidden` unless the principal is an observer or an admin."""
    if not is_observer(principal):
        raise Forbidden(OBSERVER_NEEDED)


def require_not_observer(principal: Principal, action: str) -> None:
    """403 for an observer attempting `action` (observers only read)."""
    if principal.role == "observer":
        raise Forbidden(f"an observer key is read-only: it may not {action}")


def owns(principal: Principal, owner: str | None) -> bool:
    """The principal is the resource's owner (an ownerless resource belongs to no one)."""
    return owner is not None and owner == principal.name


def is_shared_with(principal: Principal, share_with: Iterable[str]) -> bool:
    """One of the entries names the principal, or its domain as ``domain:<domain>``
    (an entry with that prefix never matches a principal's name)."""
    for entry in share_with:
        if entry.startswith(DOMAIN_SHARE):
            if principal.domain is not None and entry[len(DOMAIN_SHARE) :] == principal.domain:
                return True
        elif entry == principal.name:
            return True
    return False


def may_use(principal: Principal, owner: str | None, share_with: Iterable[str] = ()) -> bool:
    """May read, change or delete the resource: an admin, its owner, or a principal it
    is shared with. Observers get no exception: a resource's content is not
    observability data."""
    return is_admin(principal) or owns(principal, owner) or is_shared_with(principal, share_with)


def may_see(principal: Principal, owner: str | None) -> bool:
    """May read an observability record made for `owner`: observers, admins, the owner."""
    return is_observer(principal) or owns(principal, owner)


def visible_owner(principal: Principal) -> str | None:
    """The one owner whose observability records the principal is shown; None: every
    record (observers and admins). Filtering by it is `may_see` for a whole listing."""
    return None if is_observer(principal) else principal.name


def acting_for(principal: Principal, owner: str | None, what: str) -> Principal:
    """Whose records to look in: the caller's own, or (for an admin) the named `owner`'s;
    403 for anyone else naming another owner."""
    if owner is None or owner.lower() == principal.name:
        return principal
    if not is_admin(principal):
        raise Forbidden(f"only an admin reads another principal's {what}")
    return Principal(principal.key_id, owner.lower(), None, "caller")
