"""What `/mcp` lists and what an invoke may do are one decision (issue 30).

`SecurityService.may_invoke` (what the MCP face lists) answers True exactly when
`authorize_invoke` (what `/v1/invoke` and a tool call enforce) lets the call through,
for any principal, key grants and access rules; and it logs nothing.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from agent_reach.backends.memory.keys import MemoryKeyStore
from agent_reach.backends.memory.quotas import MemoryQuotaStore
from agent_reach.clock import ManualClock
from agent_reach.config import Settings
from agent_reach.errors import Forbidden
from agent_reach.identity.origins import OriginGuard
from agent_reach.model.access import AccessPolicy
from agent_reach.model.keys import Principal
from agent_reach.observability.metrics import Metrics
from agent_reach.policy.policy import Policy
from agent_reach.security.endpoints import EndpointGuard
from agent_reach.security.service import SecurityService

TAGS = ["inventory.check", "inventory.count", "orders.track", "payroll.run", "echo.say"]
PATTERNS = ["*", "inventory.*", "orders.*", "payroll.run", "echo.say", "nothing.*"]
NAMES = ["alice", "bob", "shop-app"]
DOMAINS = [None, "shop", "finance"]

principals = st.builds(
    Principal,
    key_id=st.just("k1"),
    name=st.sampled_from(NAMES),
    domain=st.sampled_from(DOMAINS),
    role=st.sampled_from(["caller", "agent", "observer", "admin"]),
    capabilities=st.lists(st.sampled_from(PATTERNS), max_size=3).map(tuple),
)
who = st.sampled_from(
    ["*", *(f"name:{n}" for n in NAMES), "domain:shop", "domain:finance", "role:agent"]
)
rules = st.lists(
    st.fixed_dictionaries(
        {
            "principals": st.lists(who, min_size=1, max_size=2),
            "capabilities": st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=2),
        }
    ),
    max_size=3,
)


def _service(policy: Policy) -> SecurityService:
    clock = ManualClock()
    return SecurityService(
        MemoryKeyStore(),
        MemoryQuotaStore(clock),
        lambda: policy,
        clock,
        Metrics(),
        enabled=True,
        guard=EndpointGuard(),
        origins=OriginGuard(Settings()),
    )


def _authorized(service: SecurityService, principal: Principal, tag: str) -> bool:
    try:
        service.authorize_invoke(principal, tag)
    except Forbidden:
        return False
    return True


@settings(max_examples=300, deadline=None)
@given(principal=principals, invoke_rules=rules)
def test_what_is_listed_is_exactly_what_may_be_invoked(
    principal: Principal, invoke_rules: list[dict[str, list[str]]]
) -> None:
    policy = Policy(access=AccessPolicy.model_validate({"invoke": invoke_rules}))
    service = _service(policy)
    for tag in TAGS:
        with capture_logs() as logged:
            listed = service.may_invoke(principal, tag)
        assert logged == []  # listing is not an attempt: no access_denied
        assert listed == _authorized(service, principal, tag), tag
