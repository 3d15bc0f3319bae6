"""Keys, access rules and the endpoint guard from plain data."""

from __future__ import annotations

import hmac

import pytest

from agent_reach.model.access import AccessPolicy, AccessRule
from agent_reach.model.keys import Principal
from agent_reach.security import keys
from agent_reach.security.access import capability_matches, decide_access
from agent_reach.security.endpoints import EndpointGuard, EndpointRefused

CALLER = Principal("k1", "order-bot", "customer-service", "caller")


def test_a_minted_key_verifies_and_its_record_holds_no_secret():
    key, record = keys.mint_key("order-bot", "customer-service", "caller", 1.0)
    key_id, secret = keys.split_key(key)
    assert key_id == record.key_id
    assert keys.matches(record, secret)
    assert not keys.matches(record, secret[:-1] + ("A" if secret[-1] != "A" else "B"))
    assert secret not in repr(record) and key not in repr(record)


def test_verification_compares_in_constant_time(monkeypatch):
    calls = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(keys.hmac, "compare_digest", spy)
    _, record = keys.mint_key("p", "d", "caller", 1.0)
    keys.matches(record, "wrong")
    assert len(calls) == 1


def test_bootstrap_admin_key_must_be_long_and_is_kept_as_a_digest():
    with pytest.raises(ValueError, match="at least"):
        keys.bootstrap_record("short", 1.0)
    record = keys.bootstrap_record("x" * 32, 1.0)
    assert record.role == "admin" and record.digest == keys.digest("x" * 32)
    assert keys.split_key("x" * 32) == (keys.BOOTSTRAP_KEY_ID, "x" * 32)


@pytest.mark.parametrize(
    ("pattern", "capability", "expected"),
    [
        ("*", "anything.at.all", True),
        ("inventory.*", "inventory.check", True),
        ("inventory.*", "inventory.check.deep", True),
        ("inventory.*", "inventory", False),
        ("inventory.*", "inventoryx.check", False),
        ("order.query", "order.query", True),
        ("order.query", "order.query2", False),
    ],
)
def test_capability_patterns(pattern, capability, expected):
    assert capability_matches(pattern, capability) is expected


def test_access_is_denied_by_default_and_granted_by_a_matching_rule():
    rules = AccessPolicy.model_validate(
        {"invoke": [{"principals": ["domain:customer-service"], "capabilities": ["Order.*"]}]}
    ).invoke
    assert decide_access(rules, CALLER, "order.query", "invoke").allowed
    assert not decide_access(rules, CALLER, "inventory.check", "invoke").allowed
    other = Principal("k2", "x", "warehouse", "caller")
    assert not decide_access(rules, other, "order.query", "invoke").allowed
    admin = Principal("k3", "root", "ops", "admin")
    assert decide_access([], admin, "anything", "register").allowed


def test_a_key_grants_its_own_capabilities_for_its_role_only():
    caller = Principal("k1", "order-bot", None, "caller", ("order.*",))
    agent = Principal("k2", "order-agent", None, "agent", ("order.*",))
    observer = Principal("k3", "grafana", None, "observer", ("order.*",))
    decided = decide_access([], caller, "order.query", "invoke")
    assert decided.allowed and decided.grant == "order.*" and "granted by the key" in decided.reason
    assert not decide_access([], caller, "order.query", "register").allowed
    assert not decide_access([], caller, "refund.apply", "invoke").allowed
    assert decide_access([], agent, "order.query", "register").grant == "order.*"
    assert not decide_access([], agent, "order.query", "invoke").allowed
    everyone = AccessPolicy.model_validate(
        {
            "invoke": [{"principals": ["*"], "capabilities": ["*"]}],
            "register": [{"principals": ["*"], "capabilities": ["*"]}],
        }
    )
    for action, rules in (("invoke", everyone.invoke), ("register", everyone.registration)):
        refused = decide_access(rules, observer, "order.query", action)
        assert not refused.allowed and refused.reason == "an observer key is read-only"
    refused = decide_access(everyone.registration, caller, "order.query", "register")
    assert not refused.allowed and refused.reason == "a caller key may not register agents"


def test_policy_rules_apply_on_top_of_a_key_grant():
    rules = AccessPolicy.model_validate(
        {"invoke": [{"principals": ["name:order-bot"], "capabilities": ["refund.apply"]}]}
    ).invoke
    caller = Principal("k1", "order-bot", None, "caller", ("order.*",))
    assert decide_access(rules, caller, "order.query", "invoke").grant == "order.*"
    by_rule = decide_access(rules, caller, "refund.apply", "invoke")
    assert by_rule.allowed and by_rule.rule is rules[0] and by_rule.grant is None
    denied = decide_access(rules, caller, "payroll.export", "invoke")
    assert not denied.allowed and "deny by default" in denied.reason


def test_a_principal_without_a_domain_matches_no_domain_rule():
    rules = AccessPolicy.model_validate(
        {"invoke": [{"principals": ["domain:none"], "capabilities": ["*"]}]}
    ).invoke
    assert not decide_access(rules, Principal("k", "p", None, "caller"), "x", "invoke").allowed


def test_rule_names_fold_to_one_spelling():
    rule = AccessRule(principals=["NAME:Order-Bot "], capabilities=["ＯＲＤＥＲ.*"])
    assert rule.principals == ["name:order-bot"] and rule.capabilities == ["order.*"]


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://0.0.0.0:80/",
        "http://[fe80::1]/",
        "http://127.1/",
        "http://0x7f000001/",
        "http://2130706433/",
        "http://0177.0.0.1/",
        "http://does-not-resolve.invalid/",
    ],
)
async def test_the_guard_refuses_dangerous_and_ambiguous_endpoints(url):
    with pytest.raises(EndpointRefused):
        await EndpointGuard().check_url(url)


async def test_the_guard_follows_the_allowed_networks():
    strict = EndpointGuard(["127.77.0.0/16"])
    await strict.check_url("http://127.77.0.11:9000/invoke")
    for url in ("http://127.0.0.1:8500/", "http://[::ffff:127.0.0.1]/", "http://localhost/"):
        with pytest.raises(EndpointRefused):
            await strict.check_url(url)
    await EndpointGuard().check_url("http://localhost:9000/")  # loopback allowed by default
    assert not EndpointGuard().is_allowed("8.8.8.8")
    assert not EndpointGuard(["0.0.0.0/0"]).is_allowed("169.254.169.254")


async def test_the_first_admin_key_may_come_from_a_file(tmp_path):
    from agent_reach.backends.selection import open_backends
    from agent_reach.clock import ManualClock
    from agent_reach.config import Settings
    from agent_reach.errors import InvalidRequest, Unauthorized
    from agent_reach.observability.metrics import Metrics
    from agent_reach.policy.policy import Policy
    from agent_reach.security.service import open_security

    key_file = tmp_path / "admin.key"
    key_file.write_text("k" * 40 + "\n", encoding="utf-8")
    settings = Settings(auth="on", admin_key_file=key_file)
    backends = await open_backends(settings, ManualClock())
    security = await open_security(settings, backends, Policy, ManualClock(), Metrics())
    assert (await security.authenticate("Bearer " + "k" * 40)).role == "admin"
    with pytest.raises(Unauthorized):
        await security.authenticate("Bearer " + "k" * 39)
    with pytest.raises(InvalidRequest, match="AR_ADMIN_KEY_FILE"):
        missing = Settings(auth="on", admin_key_file=tmp_path / "nope")
        await open_security(missing, backends, Policy, ManualClock(), Metrics())


async def test_a_cached_key_is_answered_without_waiting_and_as_authenticate_answers():
    from agent_reach.backends.selection import open_backends
    from agent_reach.clock import ManualClock
    from agent_reach.config import Settings
    from agent_reach.errors import Unauthorized
    from agent_reach.observability.metrics import Metrics
    from agent_reach.policy.policy import Policy
    from agent_reach.security.service import KEY_CACHE_S, open_security

    clock = ManualClock()
    settings = Settings(auth="on", admin_key="k" * 40)
    backends = await open_backends(settings, clock)
    security = await open_security(settings, backends, Policy, clock, Metrics())
    good, bad = "Bearer " + "k" * 40, "Bearer " + "k" * 39
    assert security.authenticate_cached(good) is None  # never read: authenticate must
    admin = await security.authenticate(good)
    assert security.authenticate_cached(good) == admin
    for refused in (bad, "Basic " + "k" * 40, "Bearer ", None):
        with pytest.raises(Unauthorized):
            await security.authenticate(refused)
        if refused != bad:  # a malformed header needs no record to refuse
            with pytest.raises(Unauthorized):
                security.authenticate_cached(refused)
    with pytest.raises(Unauthorized):  # the record is cached now: the wrong secret is refused
        security.authenticate_cached(bad)
    clock.advance(KEY_CACHE_S)
    assert security.authenticate_cached(good) is None  # a revocation must be read again
    assert await security.authenticate(good) == admin
