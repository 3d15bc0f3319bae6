"""S4: every principal x every action, compared with the expected table below.

A cell not listed as allowed is expected to be refused: 401 for the anonymous caller,
403 for everyone else (deny by default). For invocations the agents' ledgers are the
oracle too: a refused cell must deliver nothing.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import httpx
from attack_kit import (
    CAPABILITY_1,
    CAPABILITY_2,
    AgentFactory,
    ReportFactory,
    World,
    registration,
)

from agent_reach.testing.waiting import wait_until

PRINCIPALS: tuple[str | None, ...] = ("admin", "caller-a", "caller-b", "agent-x", "agent-y", None)
ANY_KEY = frozenset({"admin", "caller-a", "caller-b", "agent-x", "agent-y"})
EVERYONE = frozenset({*ANY_KEY, None})
ALLOWED: dict[str, frozenset[str | None]] = {
    "register capability 1": frozenset({"admin", "agent-x"}),
    "register capability 2": frozenset({"admin", "agent-y"}),
    "heartbeat agent X's instance": frozenset({"admin", "agent-x"}),
    "re-register agent X's instance": frozenset({"admin", "agent-x"}),
    "deregister agent X's instance": frozenset({"admin", "agent-x"}),
    "invoke capability 1": frozenset({"admin", "caller-a"}),
    "invoke capability 2": frozenset({"admin", "caller-b"}),
    "route to capability 1": frozenset({"admin", "caller-a"}),
    "route to capability 2": frozenset({"admin", "caller-b"}),
    "route text": ANY_KEY,  # a decision names an agent but invokes nothing
    "list agents": ANY_KEY,
    "show an agent": ANY_KEY,
    "capabilities": ANY_KEY,
    "policy": ANY_KEY,
    "traces": ANY_KEY,
    "decisions": ANY_KEY,
    "deadletters": ANY_KEY,
    "tasks": ANY_KEY,
    "queues": ANY_KEY,
    "metrics": ANY_KEY,
    "create a context": ANY_KEY,
    "read a context": ANY_KEY,
    "create a key": frozenset({"admin"}),
    "list keys": frozenset({"admin"}),
    "revoke a key": frozenset({"admin"}),
    "dashboard page": EVERYONE,  # static files; every datum on it comes from the API
    "healthz": EVERYONE,
}
Action = Callable[[World, str | None, str], httpx.Response]


def _register(capability: str) -> Action:
    def act(world: World, who: str | None, label: str) -> httpx.Response:
        body = registration(f"m-{label}-{capability.split('.')[0]}", world.x.endpoint, capability)
        return world.call(who, "POST", "/v1/agents", json=body)

    return act


def _x_instance(world: World, label: str) -> str:
    """A fresh instance registered by agent-x, so every cell starts from the same state."""
    victim = f"victim-{label}-{secrets.token_hex(3)}"
    body = registration(victim, world.x.endpoint, CAPABILITY_1)
    assert world.call("agent-x", "POST", "/v1/agents", json=body).status_code == 201
    return victim


def _heartbeat_x(world: World, who: str | None, label: str) -> httpx.Response:
    return world.call(who, "POST", f"/v1/agents/{_x_instance(world, label)}/heartbeat")


def _reregister_x(world: World, who: str | None, label: str) -> httpx.Response:
    body = registration(_x_instance(world, label), world.x.endpoint, CAPABILITY_1)
    return world.call(who, "POST", "/v1/agents", json=body)


def _deregister_x(world: World, who: str | None, label: str) -> httpx.Response:
    return world.call(who, "DELETE", f"/v1/agents/{_x_instance(world, label)}")


def _get(path: str) -> Action:
    return lambda world, who, _: world.call(who, "GET", path)


def _post(path: str, body: object) -> Action:
    return lambda world, who, _: world.call(who, "POST", path, json=body)


def _invoke(capability: str) -> Action:
    return lambda world, who, _: world.invoke(who, capability)


def _create_key(world: World, who: str | None, label: str) -> httpx.Response:
    body = {"principal": f"minted-by-{label}", "domain": "z", "role": "admin"}
    return world.call(who, "POST", "/v1/keys", json=body)


def _revoke_key(world: World, who: str | None, label: str) -> httpx.Response:
    throwaway = world.deployment.mint(world.keys["admin"], f"throwaway-{label}", "z", "caller")
    return world.call(who, "DELETE", f"/v1/keys/{throwaway['key_id']}")


def _read_context(world: World, who: str | None, _: str) -> httpx.Response:
    created = world.call("admin", "POST", "/v1/contexts", json={"document": {"n": 1}})
    assert created.status_code == 201, created.text
    return world.call(who, "GET", f"/v1/contexts/{created.json()['context_id']}")


ACTIONS: dict[str, Action] = {
    "register capability 1": _register(CAPABILITY_1),
    "register capability 2": _register(CAPABILITY_2),
    "heartbeat agent X's instance": _heartbeat_x,
    "re-register agent X's instance": _reregister_x,
    "deregister agent X's instance": _deregister_x,
    "invoke capability 1": _invoke(CAPABILITY_1),
    "invoke capability 2": _invoke(CAPABILITY_2),
    "route to capability 1": _post("/v1/route", {"capability": CAPABILITY_1}),
    "route to capability 2": _post("/v1/route", {"capability": CAPABILITY_2}),
    "route text": _post("/v1/route", {"text": "read the alpha records"}),
    "list agents": _get("/v1/agents"),
    "show an agent": _get("/v1/agents/x-1"),
    "capabilities": _get("/v1/capabilities"),
    "policy": _get("/v1/policy"),
    "traces": _get("/v1/traces"),
    "decisions": _get("/v1/decisions"),
    "deadletters": _get("/v1/deadletters"),
    "tasks": _get("/v1/tasks/no-such-task"),
    "queues": _get("/v1/queues"),
    "metrics": _get("/metrics"),
    "create a context": _post("/v1/contexts", {"document": {}}),
    "read a context": _read_context,
    "create a key": _create_key,
    "list keys": _get("/v1/keys"),
    "revoke a key": _revoke_key,
    "dashboard page": _get("/ui/"),
    "healthz": _get("/healthz"),
}


def expected_outcome(action: str, who: str | None) -> str:
    if who in ALLOWED[action]:
        return "allowed"
    return "unauthenticated" if who is None else "forbidden"


def observed_outcome(status: int) -> str:
    """401 and 403 are refusals; a 5xx is an error; anything else let the request in."""
    if status == 401:
        return "unauthenticated"
    if status == 403:
        return "forbidden"
    return "error" if status >= 500 else "allowed"


def test_every_principal_gets_exactly_the_access_the_table_grants(
    world: World, report: ReportFactory
) -> None:
    attack = report("access_matrix", "S4 access matrix")
    assert set(ACTIONS) == set(ALLOWED), "every action needs a row in the expected table"
    mismatches = 0
    for action, act in ACTIONS.items():
        for who in PRINCIPALS:
            label = who or "anonymous"
            delivered_before = world.deliveries()
            status = act(world, who, label).status_code
            delivered = world.deliveries()
            expected, observed = expected_outcome(action, who), observed_outcome(status)
            if expected != "allowed" and delivered > delivered_before:
                observed = "allowed"  # refused on the wire, yet an agent got the request
            mismatches += observed != expected
            attack.record(
                f"{label}: {action}",
                through=expected != "allowed" and observed in ("allowed", "error"),
                principal=label,
                action=action,
                expected=expected,
                observed=observed,
                status=status,
            )
    attack.figures["cells"] = attack.tried
    attack.figures["mismatches"] = mismatches
    attack.assert_nothing_got_through()
    wrong = [c for c in attack.cases if c["expected"] != c["observed"]]
    assert not wrong, f"cells that differ from the expected table: {wrong}"


def test_text_cannot_reach_a_denied_capability_by_waiting_for_it_to_come_back(
    world: World, start_agent: AgentFactory, report: ReportFactory
) -> None:
    attack = report("suspension_bypass", "S4 denied capability via a suspended text request")
    payroll = start_agent(name="payroll")
    spec = registration(
        "payroll-1",
        payroll.endpoint,
        "alpha.payroll",
        ttl=1,
        description="export the confidential payroll salary records of every employee",
        examples=["export payroll salaries", "show employee salary records"],
    )
    for instance in ("x-1", "y-1"):  # nothing else live, so the text has nowhere else to go
        assert world.call("admin", "DELETE", f"/v1/agents/{instance}").status_code == 204
    assert world.deployment.register(world.keys["agent-x"], spec).status_code == 201
    wait_until(lambda: world.instance("payroll-1")["status"] == "offline", "the lease to lapse")
    text = {"text": "export payroll salaries of every employee", "payload": {"by": "caller-b"}}
    asked = world.call("caller-b", "POST", "/v1/invoke", json=text)
    back = world.deployment.register(world.keys["agent-x"], {**spec, "ttl": 60})
    assert back.status_code == 201, back.text
    if asked.status_code == 202:
        task = f"/v1/tasks/{asked.json()['task_id']}"
        wait_until(
            lambda: world.call("caller-b", "GET", task).json().get("http_status"),
            "the suspended request to finish",
        )
    attack.record(
        "caller B's text reaches alpha.payroll once its agent is back",
        through=bool(payroll.agent.received),
        status=asked.status_code,
        delivered=len(payroll.agent.received),
    )
    attack.assert_nothing_got_through()
