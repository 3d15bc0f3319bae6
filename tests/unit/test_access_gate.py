"""The access gate answers "may this caller use this capability" one way for every surface.

`AccessGate.may_invoke` (what the faces list) and `routable` (what a text is routed
among, on `/v1/invoke` and `/v1/route`) let a capability through exactly when
`AccessGate.authorize` (what `/v1/invoke`, `/v1/route`, feedback and workflow runs
enforce) does, for any principal, grants, access and delegate rules, and delegation
chain (its depth, its cycles, its holder's kill switch); and they log nothing.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from agent_reach.backends.memory.contexts import MemoryContextStore
from agent_reach.backends.memory.keys import MemoryKeyStore
from agent_reach.backends.memory.mesh import MemoryMeshStore
from agent_reach.backends.memory.quotas import MemoryQuotaStore
from agent_reach.backends.memory.tasks import MemoryKeySetStore
from agent_reach.clock import ManualClock
from agent_reach.config import Settings
from agent_reach.context.service import ContextService
from agent_reach.context.tokens import TokenSigner
from agent_reach.errors import ReachError
from agent_reach.identity.origins import OriginGuard
from agent_reach.invoke.gate import AccessGate
from agent_reach.mesh.kill_switch import KillSwitch
from agent_reach.mesh.service import Mesh
from agent_reach.mesh.signing import SigningKeys
from agent_reach.mesh.tokens import DelegationTokens
from agent_reach.model.access import AccessPolicy
from agent_reach.model.delegation import DelegationPolicy
from agent_reach.model.keys import Chain, Link, Principal
from agent_reach.observability.metrics import Metrics
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex
from agent_reach.security.endpoints import EndpointGuard
from agent_reach.security.service import SecurityService

TAGS = ["inventory.check", "orders.track", "payroll.run", "echo.say"]
PATTERNS = ["*", "inventory.*", "orders.*", "payroll.run", "echo.say"]
NAMES = ["alice", "shop-app", "order-agents"]
DISABLED = "order-1"  # an instance the kill switch holds out

principals = st.builds(
    Principal,
    key_id=st.just("k1"),
    name=st.sampled_from(NAMES),
    domain=st.sampled_from([None, "shop"]),
    role=st.sampled_from(["caller", "agent", "observer", "admin"]),
    capabilities=st.lists(st.sampled_from(["*", *PATTERNS]), max_size=2).map(tuple),
)
links = st.builds(
    Link,
    principal=st.sampled_from(NAMES),
    domain=st.sampled_from([None, "shop"]),
    role=st.just("agent"),
    instance=st.sampled_from(["cs-bot", "cs-bot", "cs-bot", DISABLED]),
    capability=st.sampled_from(["cs.answer", "cs.answer", *TAGS]),  # a tag again: a cycle
)


@st.composite
def callers(draw: st.DrawFn) -> Principal:
    """A principal on its own, or acting through a delegation chain of 1-3 agents."""
    principal = draw(principals)
    if not draw(st.booleans()):
        return principal
    chain = Chain(
        caller=principal,
        links=tuple(draw(st.lists(links, min_size=1, max_size=2))),
        root="req-root",
        scope=tuple(draw(st.lists(st.sampled_from(["*", *PATTERNS]), min_size=1, max_size=2))),
        context_id=None,
        hop=4,
        budget=None,
        expires_at=1e12,
    )
    return Principal(
        principal.key_id,
        principal.name,
        principal.domain,
        principal.role,
        principal.capabilities,
        chain,
    )


who = st.sampled_from(["*", "*", *(f"name:{n}" for n in NAMES), "domain:shop", "role:agent"])
rule = st.fixed_dictionaries(
    {
        "principals": st.lists(who, min_size=1, max_size=2),
        "capabilities": st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=2),
    }
)
rules = st.lists(rule, max_size=2)
delegates = st.lists(rule, min_size=1, max_size=2)  # with none, no chain may go on at all


def _gate(policy: Policy) -> AccessGate:
    clock = ManualClock()
    index = RegistryIndex()
    store = MemoryMeshStore(clock)
    switch = KillSwitch(store, index, clock)
    switch.records[DISABLED] = {"by": "admin", "at": 0.0}
    tokens = DelegationTokens(SigningKeys(MemoryKeySetStore(clock), clock, 3600.0), "urn:t", clock)
    mesh = Mesh(tokens, switch, store, index, lambda: policy, clock)
    security = SecurityService(
        MemoryKeyStore(),
        MemoryQuotaStore(clock),
        lambda: policy,
        clock,
        Metrics(),
        enabled=True,
        guard=EndpointGuard(),
        origins=OriginGuard(Settings()),
        delegations=mesh,
    )
    contexts = ContextService(MemoryContextStore(clock), TokenSigner(b"s" * 32, clock), Settings())
    return AccessGate(security, contexts, clock)


def _authorized(gate: AccessGate, principal: Principal, tag: str) -> bool:
    try:
        gate.authorize(principal, tag)
    except ReachError:  # 403 forbidden or delegation_denied, 422 delegation_cycle
        return False
    return True


@settings(max_examples=300, deadline=None)
@given(
    principal=callers(),
    invoke_rules=rules,
    delegate_rules=delegates,
    max_depth=st.integers(min_value=1, max_value=4),
)
def test_what_is_listed_and_routed_to_is_exactly_what_may_be_invoked(
    principal: Principal,
    invoke_rules: list[dict[str, list[str]]],
    delegate_rules: list[dict[str, list[str]]],
    max_depth: int,
) -> None:
    access = AccessPolicy.model_validate({"invoke": invoke_rules, "delegate": delegate_rules})
    gate = _gate(Policy(access=access, delegation=DelegationPolicy(max_depth=max_depth)))
    routable = gate.routable(principal)
    for tag in TAGS:
        with capture_logs() as logged:
            listed = gate.may_invoke(principal, tag)
            routed = True if routable is None else routable(tag)
        assert logged == []  # listing is not an attempt: no access_denied
        authorized = _authorized(gate, principal, tag)
        assert listed == authorized, tag
        assert routed == authorized, tag


def test_an_admin_on_its_own_is_routed_over_everything_one_through_a_chain_is_not() -> None:
    gate = _gate(Policy())
    admin = Principal("k1", "root", None, "admin")
    assert gate.routable(admin) is None
    link = Link("order-agents", None, "agent", "cs-bot", "orders.track")
    chain = Chain(admin, (link,), "req-root", ("*",), None, 4, None, 1e12)
    delegated = Principal("k1", "root", None, "admin", (), chain)
    routable = gate.routable(delegated)
    assert routable is not None
    assert not routable("orders.track")  # already in the chain: a cycle
    assert not routable("echo.say")  # no delegate rule lets order-agents hand it on
