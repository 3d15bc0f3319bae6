"""The policy's identity section turns IdP groups and scopes into roles, grants and
domains, bounds what an issuer's tokens may be, and changes at run time (`PUT
/v1/policy`) on every coordinator sharing the state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from idp_kit import TestIdP
from reach_kit import Reach

from agent_reach.testing.waiting import wait_until


def _who(reach: Reach, token: str, at: str | None = None) -> Any:
    answer = reach.call(token, "GET", "/v1/keys/self", at=at)
    return answer.json() if answer.status_code == 200 else answer.json()["error"]["code"]


def _eventually(reach: Reach, what: str, probe: Any, expected: Any) -> None:
    """`probe(url)` gives `expected` on every coordinator, once the policy reached it."""
    for url in (reach.url, reach.second()):
        wait_until(lambda u=url: probe(u) == expected, f"{what} at {url}")


def test_a_group_mapping_added_at_run_time_makes_a_token_an_agent_everywhere(
    reach: Reach, idp: TestIdP
):
    token = idp.token({"groups": ["shop-agents", "staff"]}, sub="svc-orders")
    assert _who(reach, token) == "role_not_allowed"  # no role claimed, none mapped

    reach.set_policy(
        identity={
            "mappings": [
                {
                    "group": "shop-agents",
                    "role": "agent",
                    "capabilities": ["alpha.*"],
                    "domain": "shop",
                }
            ]
        }
    )

    expected = {
        "key_id": "token",
        "principal": f"127.0.0.1:{idp.port}:svc-orders",  # no issuer rule: namespaced
        "domain": "shop",
        "role": "agent",
        "capabilities": ["alpha.*"],
    }
    _eventually(reach, "the mapping", lambda url: _who(reach, token, url), expected)
    _, endpoint = reach.start_agent()
    assert reach.register(token, "orders-1", endpoint, "alpha.read").status_code == 201
    assert reach.register(token, "orders-2", endpoint, "beta.read").status_code == 403


def test_a_scope_mapping_grants_invocation_until_it_is_taken_away(reach: Reach, idp: TestIdP):
    agent = idp.token({"reach_role": "agent"}, sub="agent-x")
    _, endpoint = reach.start_agent()
    assert reach.register(agent, "x-1", endpoint, "alpha.read").status_code == 201
    # a real scope the IdP granted the client, nothing else
    token = idp.token({}, sub="reporting", scope="reach.invoke")
    reach.set_policy(
        identity={
            "mappings": [{"scope": "reach.invoke", "role": "caller", "capabilities": ["alpha.*"]}]
        }
    )
    _eventually(
        reach,
        "the scope mapping",
        lambda url: reach.invoke(token, "alpha.read", at=url).status_code,
        200,
    )

    reach.set_policy(identity={"mappings": []})

    _eventually(
        reach,
        "the mapping's removal",
        lambda url: reach.invoke(token, "alpha.read", at=url).status_code,
        403,
    )


def test_an_issuer_rule_gives_a_default_role_and_names_the_groups_claim(reach: Reach, idp: TestIdP):
    token = idp.token({"roles": ["ops"]}, sub="dashboard-bot")
    reach.set_policy(
        identity={
            "issuers": [
                {
                    "issuer": idp.issuer,
                    "roles": ["caller", "observer"],
                    "default_role": "caller",
                    "groups_claim": "roles",
                }
            ]
        }
    )
    _eventually(reach, "the default role", lambda url: _who(reach, token, url)["role"], "caller")

    reach.set_policy(
        identity={
            "issuers": [
                {"issuer": idp.issuer, "roles": ["caller", "observer"], "groups_claim": "roles"}
            ],
            "mappings": [{"group": "ops", "role": "observer"}],
        }
    )

    _eventually(reach, "the mapped role", lambda url: _who(reach, token, url)["role"], "observer")
    assert reach.call(token, "GET", "/v1/policy").status_code == 200  # an observer reads it
    assert reach.invoke(token, "alpha.read").status_code == 403  # and does nothing else


def test_a_mapping_of_another_issuer_does_not_apply(reach: Reach, idp: TestIdP):
    token = idp.token({"groups": ["shop-agents"]}, sub="svc-other")
    reach.set_policy(
        identity={
            "mappings": [
                {"issuer": "https://elsewhere.example", "group": "shop-agents", "role": "agent"}
            ]
        }
    )
    _eventually(
        reach, "the policy", lambda url: _mapped_issuers(reach, url), ["https://elsewhere.example"]
    )
    for url in (reach.url, reach.second()):
        assert _who(reach, token, url) == "role_not_allowed"


def _mapped_issuers(reach: Reach, url: str) -> list[str]:
    policy = reach.call(reach.admin_key, "GET", "/v1/policy", at=url).json()["policy"]
    return [m["issuer"] for m in policy["identity"]["mappings"]]


def test_two_trusted_issuers_each_bounded_by_its_own_rule(
    open_reach: Callable[..., Reach], idp: TestIdP, start_idp: Callable[..., TestIdP]
):
    partner = start_idp()
    reach = open_reach(idp, partner)
    reach.set_policy(identity={"issuers": [{"issuer": partner.issuer, "roles": ["caller"]}]})
    ours = idp.token({"reach_role": "agent"}, sub="svc-ours")
    theirs = partner.token({"reach_role": "agent"}, sub="svc-theirs")
    their_caller = partner.token({"reach_role": "caller", "reach_domain": "a"}, sub="partner-app")

    _eventually(reach, "the issuer rule", lambda url: _who(reach, theirs, url), "role_not_allowed")
    assert _who(reach, ours)["role"] == "agent"
    # A rule without principal_prefix keeps the issuer's namespace.
    assert _who(reach, their_caller)["principal"] == f"127.0.0.1:{partner.port}:partner-app"
