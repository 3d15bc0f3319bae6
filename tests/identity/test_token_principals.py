"""IdP tokens as principals: every rule that holds for an API key's principal holds for a
token's (issue 28): access rules, grants, ownership, observers, per-principal decisions
and traces. The same cast acts once with minted keys and once with tokens from
the real IdP carrying the same name, domain, role and grants; both must get the same
answer in every cell, and the cells that matter are pinned."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from idp_kit import TestIdP
from reach_kit import QUOTA_BURST, QUOTA_CALLER, Reach

from agent_reach.testing.waiting import wait_until

# name -> (domain, role, grants): the policy lets domain a invoke alpha.*, domain b
# beta.*, agent-x register alpha.*; the grants are what a key would carry.
CAST: dict[str, tuple[str, str, list[str]]] = {
    "caller-a": ("a", "caller", []),
    "caller-b": ("b", "caller", []),
    "caller-g": ("g", "caller", ["beta.read"]),
    "agent-x": ("agents", "agent", []),
    "agent-g": ("agents", "agent", ["beta.*"]),
    "observer": ("ops", "observer", []),
}
Credentials = dict[str, str]
Cell = Callable[[Reach, Credentials, str, str], str]


def _keys(reach: Reach) -> Credentials:
    return {
        name: reach.mint(name, domain, role, *grants)
        for name, (domain, role, grants) in CAST.items()
    }


def _tokens(idp: TestIdP) -> Credentials:
    return {
        name: idp.token(
            {"reach_role": role, "reach_domain": domain, "reach_capabilities": grants}, sub=name
        )
        for name, (domain, role, grants) in CAST.items()
    }


def _status(answer: Any) -> str:
    return str(answer.status_code)


def _register(capability: str) -> Cell:
    def cell(reach: Reach, creds: Credentials, who: str, kind: str) -> str:
        _, endpoint = reach.start_agent(who)
        return _status(
            reach.register(creds[who], f"{kind}-{who}-{capability}", endpoint, capability)
        )

    return cell


def _heartbeat_x(reach: Reach, creds: Credentials, who: str, kind: str) -> str:
    path = f"/v1/agents/{kind}-agent-x-alpha.read/heartbeat"
    return _status(reach.call(creds[who], "POST", path))


def _invoke(capability: str) -> Cell:
    def cell(reach: Reach, creds: Credentials, who: str, kind: str) -> str:
        body = {
            "capability": capability,
            "payload": {},
            "suspend": False,
            "request_id": f"{kind}-{who}-{capability}",
        }
        return _status(reach.call(creds[who], "POST", "/v1/invoke", json=body))

    return cell


def _listed_agents(reach: Reach, creds: Credentials, who: str, kind: str) -> str:
    answer = reach.call(creds[who], "GET", "/v1/agents")
    ids = sorted(
        a["id"].removeprefix(f"{kind}-")
        for a in answer.json().get("agents", [])
        if a["id"].startswith(f"{kind}-")
    )
    return f"{answer.status_code} {ids}"


def _own_decisions(reach: Reach, creds: Credentials, who: str, kind: str) -> str:
    answer = reach.call(creds[who], "GET", "/v1/decisions?limit=1000")
    shown = sorted(
        d["request_id"].removeprefix(f"{kind}-")
        for d in answer.json().get("decisions", [])
        if str(d.get("request_id", "")).startswith(f"{kind}-")
    )
    return f"{answer.status_code} {shown}"


def _on_a_context(method: str, body: Any = None) -> Cell:
    def cell(reach: Reach, creds: Credentials, who: str, kind: str) -> str:
        made = reach.call(creds["caller-a"], "POST", "/v1/contexts", json={"document": {"n": 1}})
        assert made.status_code == 201, made.text
        path = f"/v1/contexts/{made.json()['context_id']}"
        return _status(reach.call(creds[who], method, path, json=body))

    return cell


def _read_a_trace(reach: Reach, creds: Credentials, who: str, kind: str) -> str:
    body = {"capability": "alpha.read", "payload": {}, "suspend": False}
    made = reach.call(creds["caller-a"], "POST", "/v1/invoke", json=body)
    assert made.status_code == 200, made.text
    path = f"/v1/traces/{made.json()['trace_id']}"
    wait_until(lambda: reach.admin("GET", path).status_code == 200, "the trace to be stored")
    return _status(reach.call(creds[who], "GET", path))


def _create_context(reach: Reach, creds: Credentials, who: str, kind: str) -> str:
    return _status(reach.call(creds[who], "POST", "/v1/contexts", json={"document": {}}))


def _self(reach: Reach, creds: Credentials, who: str, kind: str) -> str:
    answer = reach.call(creds[who], "GET", "/v1/keys/self")
    body = answer.json()
    shown = [body.get(name) for name in ("principal", "domain", "role", "capabilities")]
    return f"{answer.status_code} {shown}"


def _policy(reach: Reach, creds: Credentials, who: str, kind: str) -> str:
    return _status(reach.call(creds[who], "GET", "/v1/policy"))


# In order: registrations first, then what depends on them.
CELLS: dict[str, Cell] = {
    "register alpha.read": _register("alpha.read"),
    "register beta.read": _register("beta.read"),
    "heartbeat agent-x's instance": _heartbeat_x,
    "invoke alpha.read": _invoke("alpha.read"),
    "invoke beta.read": _invoke("beta.read"),
    "list agents": _listed_agents,
    "list decisions": _own_decisions,
    "read caller-a's trace": _read_a_trace,
    "create a context": _create_context,
    "read caller-a's context": _on_a_context("GET"),
    "write caller-a's context": _on_a_context("PATCH", {"merge": {"n": 2}}),
    "delete caller-a's context": _on_a_context("DELETE"),
    "read the policy": _policy,
    "who am I": _self,
}
# Cells pinned whatever keys answer: the rules the issue names.
PINNED = {
    ("register alpha.read", "agent-x"): "201",  # a policy rule by name
    ("register alpha.read", "caller-a"): "403",  # callers never register
    ("register alpha.read", "observer"): "403",  # observers only read
    ("register beta.read", "agent-g"): "201",  # the grants claim, like a key's grants
    ("register beta.read", "agent-x"): "403",
    ("heartbeat agent-x's instance", "agent-x"): "200",
    ("heartbeat agent-x's instance", "agent-g"): "403",  # another principal's instance
    ("invoke alpha.read", "caller-a"): "200",  # a policy rule by domain
    ("invoke alpha.read", "caller-b"): "403",
    ("invoke beta.read", "caller-g"): "200",  # the grants claim
    ("invoke beta.read", "observer"): "403",
    ("list decisions", "caller-a"): "200 ['caller-a-alpha.read']",  # its own only
    ("read caller-a's trace", "caller-a"): "200",
    ("read caller-a's trace", "caller-b"): "404",  # holds none of its spans
    ("read caller-a's trace", "observer"): "200",
    ("create a context", "observer"): "403",
    ("read caller-a's context", "caller-a"): "200",
    ("read caller-a's context", "caller-b"): "404",  # owned by its creator
    ("write caller-a's context", "caller-b"): "404",
    ("delete caller-a's context", "caller-b"): "404",
    ("read the policy", "observer"): "200",
    ("read the policy", "caller-a"): "403",
}


def _outcomes(reach: Reach, creds: Credentials, kind: str) -> dict[tuple[str, str], str]:
    return {
        (cell_name, who): cell(reach, creds, who, kind)
        for cell_name, cell in CELLS.items()
        for who in CAST
    }


def test_a_token_principal_gets_every_answer_a_key_principal_gets(reach: Reach, idp: TestIdP):
    by_key = _outcomes(reach, _keys(reach), "key")
    by_token = _outcomes(reach, _tokens(idp), "token")

    different = {
        cell: (by_key[cell], answer) for cell, answer in by_token.items() if answer != by_key[cell]
    }
    # who-am-I differs in the key id only, which the cell leaves out
    assert different == {}
    assert {cell: by_token[cell] for cell in PINNED} == PINNED


def test_a_quota_holds_for_a_token_principal_on_every_coordinator(reach: Reach, idp: TestIdP):
    agent = idp.token({"reach_role": "agent"}, sub="agent-x")
    _, endpoint = reach.start_agent()
    assert reach.register(agent, "x-1", endpoint, "alpha.read").status_code == 201
    caller = idp.token({"reach_role": "caller", "reach_domain": "a"}, sub=QUOTA_CALLER)
    coordinators = [reach.url, reach.second()]

    answers = [
        reach.invoke(caller, "alpha.read", at=coordinators[n % 2]).status_code
        for n in range(QUOTA_BURST + 2)
    ]

    assert answers == [200] * QUOTA_BURST + [429, 429]
    # a fresh token of the same principal draws on the same bucket
    again = idp.token({"reach_role": "caller", "reach_domain": "a"}, sub=QUOTA_CALLER)
    assert reach.invoke(again, "alpha.read").status_code == 429


def test_api_keys_keep_working_beside_tokens(reach: Reach, idp: TestIdP):
    key = reach.mint("caller-a", "a", "caller")
    agent = idp.token({"reach_role": "agent"}, sub="agent-x")
    fake, endpoint = reach.start_agent()
    assert reach.register(agent, "x-1", endpoint, "alpha.read").status_code == 201

    assert reach.invoke(key, "alpha.read").status_code == 200
    assert reach.admin("GET", "/v1/agents").status_code == 200
    refused = reach.call("ar_0123456789abcdef_nope", "GET", "/v1/agents")
    assert (refused.status_code, refused.json()["error"]["code"]) == (401, "unauthorized")
    assert len(fake.received) == 1


@pytest.mark.parametrize("role", ["caller", "observer"])
def test_a_token_principal_that_may_not_invoke_delivers_nothing(
    reach: Reach, idp: TestIdP, role: str
):
    agent = idp.token({"reach_role": "agent"}, sub="agent-x")
    fake, endpoint = reach.start_agent()
    assert reach.register(agent, "x-1", endpoint, "alpha.read").status_code == 201
    outsider = idp.token({"reach_role": role, "reach_domain": "z"}, sub=f"outsider-{role}")

    answer = reach.invoke(outsider, "alpha.read")

    assert answer.status_code == 403, answer.text
    assert fake.received == []
