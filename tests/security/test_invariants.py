"""Invariants that one changed line would break silently (issue 41): each test here was
seen to fail with that line broken.

(a) a delegation token is held to the `[[access.delegate]]` rules in force when it is
used, not to those it was issued under; (b) one key's A2A tasks are neither readable nor
listed by another; (c) a disabled agent that deregisters and registers again stays out
of routing; (d) a `pair` quota bucket is the caller's own and (e) one capability's; an
MCP session id is bound to the principal that opened it, on the fast path and the full
stack. On memory and Redis (there, across both coordinators where the state is shared).
"""

from __future__ import annotations

import secrets
from typing import Any

import httpx
import orjson
from attack_kit import CAPABILITY_1, CAPABILITY_2, AgentFactory, World, registration

from agent_reach.testing.waiting import wait_until

# Delegation tokens live as long as their request's deadline: long enough for the test.
HELD_CLASS = {"held": {"timeout_s": 600}}
MCP_ACCEPT = "application/json, text/event-stream"
HANDSHAKE = "2025-11-25"  # an MCP version with sessions (Mcp-Session-Id)


def _replace_policy(world: World, **sections: Any) -> None:
    """PUT the policy in force with `sections` replaced, then wait until every
    coordinator holds that version."""
    current = world.call("admin", "GET", "/v1/policy").json()["policy"]
    changed = world.call("admin", "PUT", "/v1/policy", json={**current, **sections})
    assert changed.status_code == 200, changed.text
    version = changed.json()["status"]["version"]
    for coordinator in world.deployment.both():
        wait_until(
            lambda c=coordinator: (
                world.deployment.call(world.keys["admin"], "GET", "/v1/policy", at=c).json()[
                    "version"
                ]
                == version
            ),
            f"policy {version} at {coordinator.url}",
        )


# -- (a) delegate rules -------------------------------------------------------------------


def test_a_delegation_token_is_refused_once_its_delegate_rule_is_gone(world: World) -> None:
    access = world.call("admin", "GET", "/v1/policy").json()["policy"]["access"]
    rule = {"principals": ["name:agent-x"], "capabilities": ["beta.*"]}
    _replace_policy(world, access={**access, "delegate": [rule]}, timeout_classes=HELD_CLASS)
    body = {"capability": CAPABILITY_1, "payload": {}, "timeout_class": "held"}
    assert world.call("admin", "POST", "/v1/invoke", json=body).status_code == 200
    token = world.x.agent.received[-1].body["delegation"]["token"]
    handed_on = {"capability": CAPABILITY_2, "payload": {}, "suspend": False}

    def hand_on(at: Any = None) -> httpx.Response:
        return world.deployment.call(token, "POST", "/v1/invoke", json=handed_on, at=at)

    assert hand_on().status_code == 200  # the rule in force lets agent-x hand beta.* on
    delivered = len(world.y.agent.received)

    _replace_policy(world, access={**access, "delegate": []})

    for coordinator in world.deployment.both():
        refused = hand_on(coordinator)
        assert refused.status_code == 403, refused.text
        error = refused.json()["error"]
        assert (error["code"], error.get("failed")) == ("delegation_denied", "delegate_rule")
    assert len(world.y.agent.received) == delivered


# -- (b) A2A tasks per principal -----------------------------------------------------------


def _a2a(world: World, principal: str, method: str, params: Any) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer = world.call(principal, "POST", "/a2a", json=body, headers={"A2A-Version": "1.0"})
    assert answer.status_code == 200, answer.text
    reply: dict[str, Any] = answer.json()
    return reply


def _message(capability: str) -> dict[str, Any]:
    return {
        "messageId": secrets.token_hex(8),
        "role": "ROLE_USER",
        "parts": [{"data": {"secret": "caller A's"}}],
        "metadata": {"capability": capability},
    }


def test_one_keys_a2a_tasks_are_not_readable_or_listed_by_another(world: World) -> None:
    params = {"message": _message(CAPABILITY_1), "configuration": {"returnImmediately": True}}
    running = _a2a(world, "caller-a", "SendMessage", params)["result"]["task"]["id"]
    # A skill nobody offers (A may call alpha.*): a rejected task, kept with its message
    rejected = _a2a(world, "caller-a", "SendMessage", {"message": _message("alpha.nobody")})
    declined = rejected["result"]["task"]["id"]
    mine = {running, declined}
    assert {_a2a(world, "caller-a", "GetTask", {"id": t})["result"]["id"] for t in mine} == mine
    listed = _a2a(world, "caller-a", "ListTasks", {})["result"]["tasks"]
    assert {t["id"] for t in listed} == mine

    for task_id in mine:
        for method in ("GetTask", "CancelTask"):
            other = _a2a(world, "caller-b", method, {"id": task_id})
            assert other.get("error", {}).get("code") == -32001, (method, other)
    listed = _a2a(world, "caller-b", "ListTasks", {})["result"]
    assert (listed["tasks"], listed["totalSize"]) == ([], 0)


# -- (c) the kill switch across a re-registration -----------------------------------------


def test_a_disabled_agent_that_registers_again_stays_out_of_routing(world: World) -> None:
    disabled = world.call("admin", "POST", "/v1/agents/x-1/disable")
    assert disabled.status_code == 200, disabled.text
    assert world.call("agent-x", "DELETE", "/v1/agents/x-1").status_code in (200, 204)
    again = world.deployment.register(
        world.keys["agent-x"], registration("x-1", world.x.endpoint, CAPABILITY_1)
    )
    assert again.status_code == 201, again.text
    delivered = len(world.x.agent.received)

    for coordinator in world.deployment.both():
        refused = world.deployment.call(
            world.keys["caller-a"],
            "POST",
            "/v1/invoke",
            json={"capability": CAPABILITY_1, "payload": {}, "suspend": False},
            at=coordinator,
        )
        assert refused.status_code >= 400, refused.text
    assert len(world.x.agent.received) == delivered

    assert world.call("admin", "POST", "/v1/agents/x-1/enable").status_code == 200
    wait_until(
        lambda: world.invoke("caller-a", CAPABILITY_1).status_code == 200,
        "x-1 back in routing once enabled",
    )


# -- (d), (e) quota buckets ----------------------------------------------------------------

# One token each, refilled about never: a second call in the same bucket is refused.
PAIR_QUOTA = [
    {
        "principals": ["domain:q"],
        "capabilities": ["alpha.*"],
        "rate_per_s": 0.0001,
        "burst": 1,
        "scope": "pair",
    }
]


def _quota_world(world: World, start_agent: AgentFactory) -> tuple[str, str]:
    """Two callers of domain q allowed alpha.*, a second alpha capability, the quota."""
    admin = world.keys["admin"]
    first = world.deployment.mint(admin, "quota-one", "q", "caller")["key"]
    second = world.deployment.mint(admin, "quota-two", "q", "caller")["key"]
    writer = start_agent(name="x-write")
    answer = world.deployment.register(
        world.keys["agent-x"], registration("x-2", writer.endpoint, "alpha.write")
    )
    assert answer.status_code == 201, answer.text
    access = world.call("admin", "GET", "/v1/policy").json()["policy"]["access"]
    domain_q = {"principals": ["domain:q"], "capabilities": ["alpha.*"]}
    _replace_policy(
        world, access={**access, "invoke": [*access["invoke"], domain_q]}, quotas=PAIR_QUOTA
    )
    return first, second


def _invoke(world: World, key: str, capability: str) -> int:
    body = {"capability": capability, "payload": {}, "suspend": False}
    return world.deployment.call(key, "POST", "/v1/invoke", json=body).status_code


def test_a_pair_quota_bucket_is_the_callers_own(world: World, start_agent: AgentFactory) -> None:
    first, second = _quota_world(world, start_agent)
    assert _invoke(world, first, CAPABILITY_1) == 200
    assert _invoke(world, first, CAPABILITY_1) == 429
    assert _invoke(world, second, CAPABILITY_1) == 200  # another caller: another bucket


def test_a_pair_quota_bucket_is_one_capabilitys(world: World, start_agent: AgentFactory) -> None:
    first, _ = _quota_world(world, start_agent)
    assert _invoke(world, first, CAPABILITY_1) == 200
    assert _invoke(world, first, CAPABILITY_1) == 429
    assert _invoke(world, first, "alpha.write") == 200  # another capability: another bucket


# -- MCP sessions are bound to who opened them ---------------------------------------------


def _mcp(
    world: World, principal: str, message: dict[str, Any], session: str | None = None
) -> httpx.Response:
    headers = {"accept": MCP_ACCEPT, "content-type": "application/json"}
    if session is not None:
        headers |= {"mcp-session-id": session, "mcp-protocol-version": HANDSHAKE}
    return world.call(principal, "POST", "/mcp", content=orjson.dumps(message), headers=headers)


def _open_session(world: World, principal: str) -> str:
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": HANDSHAKE,
            "capabilities": {},
            "clientInfo": {"name": "binding-test", "version": "1"},
        },
    }
    opened = _mcp(world, principal, initialize)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert _mcp(world, principal, initialized, session).status_code == 202
    return session


def test_an_mcp_session_used_with_another_principals_key_is_not_found(world: World) -> None:
    session = _open_session(world, "caller-a")
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": CAPABILITY_1, "arguments": {"payload": {}}},
    }
    listing = {"jsonrpc": "2.0", "id": 8, "method": "tools/list"}
    own = _mcp(world, "caller-a", call, session)
    assert own.status_code == 200 and b'isError":false' in own.content, own.text
    delivered = world.deliveries()

    # tools/call is answered on the edge's fast path, tools/list by the full stack
    for message in (call, listing):
        for thief in ("caller-b", "admin"):
            stolen = _mcp(world, thief, message, session)
            assert stolen.status_code == 404, (thief, message["method"], stolen.text)
            assert b"Session not found" in stolen.content
    assert world.deliveries() == delivered
    assert _mcp(world, "caller-a", listing, session).status_code == 200  # still its own
