"""The shared least-privilege checks, context ownership records and span owners."""

from __future__ import annotations

import pytest

from agent_reach.context.ownership import ContextAccess, created_by
from agent_reach.errors import Forbidden
from agent_reach.model.keys import Principal
from agent_reach.observability.spans import Span
from agent_reach.observability.trace_store import span_owners
from agent_reach.security.ownership import (
    is_observer,
    is_shared_with,
    may_see,
    may_use,
    require_not_observer,
    require_observer,
)

CS_BOT = Principal("k1", "cs-bot", "customer-service", "caller")
OTHER = Principal("k2", "cs-bot-2", "customer-service", "caller")
INV = Principal("k3", "inv-agent", "warehouse", "agent")
OPS = Principal("k4", "grafana", None, "observer")
ROOT = Principal("k5", "root", None, "admin")
NAMED_LIKE_A_DOMAIN = Principal("k6", "domain:warehouse", None, "caller")


def test_a_resource_is_used_by_its_owner_its_shares_and_admins_only():
    assert may_use(CS_BOT, "cs-bot")
    assert may_use(ROOT, "cs-bot")
    assert not may_use(OTHER, "cs-bot")
    assert not may_use(OPS, "cs-bot")  # observers read observability data, not content
    assert may_use(OTHER, "cs-bot", ["cs-bot-2"])
    assert may_use(INV, "cs-bot", ["domain:warehouse"])
    assert not may_use(OTHER, "cs-bot", ["domain:warehouse"])
    assert not may_use(CS_BOT, None)  # an ownerless resource: admins only
    assert may_use(ROOT, None)


def test_a_domain_share_never_matches_a_principal_by_name():
    assert not is_shared_with(NAMED_LIKE_A_DOMAIN, ["domain:warehouse"])
    assert not is_shared_with(Principal("k", "p", None, "caller"), ["domain:none"])


def test_observability_records_are_seen_by_their_owner_observers_and_admins():
    assert may_see(CS_BOT, "cs-bot") and may_see(OPS, "cs-bot") and may_see(ROOT, None)
    assert not may_see(OTHER, "cs-bot") and not may_see(INV, None)
    assert is_observer(OPS) and is_observer(ROOT) and not is_observer(INV)
    with pytest.raises(Forbidden, match="observer or admin key"):
        require_observer(CS_BOT)
    require_observer(OPS)
    with pytest.raises(Forbidden, match="read-only"):
        require_not_observer(OPS, "invoke")
    require_not_observer(CS_BOT, "invoke")


def test_context_access_round_trips_and_old_contexts_belong_to_no_one():
    access = created_by(CS_BOT, ["domain:warehouse", "domain:warehouse", "cs-bot-2"])
    assert access.share_with == ("domain:warehouse", "cs-bot-2")
    assert ContextAccess.decode(access.encode()) == access
    assert ContextAccess.decode(b"") == ContextAccess(None)
    assert access.admits(INV) and access.admits(OTHER) and not access.admits(OPS)


def _span(span_id: str, parent: str | None, principal: str | None = None) -> Span:
    return Span("t" * 32, span_id, parent, "invoke", "cap", 0.0, principal=principal)


def test_a_span_belongs_to_the_principal_of_the_nearest_request_above_it():
    spans = [
        _span("invoke-a", None, "caller-a"),
        _span("attempt-a", "invoke-a"),
        _span("nested-x", "attempt-a", "agent-x"),
        _span("attempt-x", "nested-x"),
        _span("orphan", "evicted-parent"),
        _span("loop-1", "loop-2"),
        _span("loop-2", "loop-1"),
    ]
    assert span_owners(spans) == {
        "invoke-a": "caller-a",
        "attempt-a": "caller-a",
        "nested-x": "agent-x",
        "attempt-x": "agent-x",
        "orphan": None,
        "loop-1": None,
        "loop-2": None,
    }


def test_a_callers_trace_listing_and_view_hold_only_its_own_spans():
    from agent_reach.clock import ManualClock
    from agent_reach.observability.trace_store import TraceFilter, TraceStore

    store = TraceStore(2, ManualClock())
    nested = [
        Span("a" * 32, "invoke-a", None, "invoke", "alpha", 0.0, principal="caller-a"),
        Span("a" * 32, "attempt-a", "invoke-a", "attempt", "alpha", 0.0, attempt=1),
        Span("a" * 32, "nested-x", "attempt-a", "invoke", "beta", 0.0, principal="agent-x"),
    ]
    for span in [*nested, Span("b" * 32, "invoke-b", None, "invoke", "beta", 0.0, principal="b")]:
        store.add(span)

    def listed(owner: str | None) -> list[str]:
        return [t.trace_id[0] for t in store.recent(TraceFilter(owner=owner), 10)]

    assert listed(None) == ["b", "a"] and listed("caller-a") == ["a"] and listed("nobody") == []
    view = store.get("a" * 32, "agent-x")
    assert view is not None and [s["span_id"] for s in view["spans"]] == ["nested-x"]
    assert view["summary"].capability == "beta"
    assert store.get("a" * 32, "b") is None
    store.add(Span("c" * 32, "invoke-c", None, "invoke", "gamma", 0.0, principal="caller-a"))
    assert listed("caller-a") == ["c"]  # trace a was evicted, and its owners with it
