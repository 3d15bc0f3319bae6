"""S4: least privilege, as a principal x resource x action matrix with the exact answer of
every cell (issue 16).

Principals: the admin, an observer, callers A and B, agents X and Y, the holder of the
metrics scrape token, and an anonymous caller. Resources: the registry, invocations and
routes, contexts (private and shared), tasks, decisions, traces, dead letters, queues,
the policy, metrics, workflow runs and keys. Before the cells run, a scene is set: A
invokes `alpha.read` (delivered to X, which makes a nested call to `beta.read` under A's
trace), B invokes `beta.read`, A queues an asynchronous task and runs a workflow.
Observability cells record which of the scene's requests, traces or spans each principal
was shown, so "200 but someone else's data" is a mismatch too. The agents' ledgers are
the oracle for invocations: a refused cell must deliver nothing.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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

Who = str | None
PRINCIPALS: tuple[Who, ...] = (
    "admin",
    "observer",
    "caller-a",
    "caller-b",
    "agent-x",
    "agent-y",
    "scraper",
    None,
)
KEYS = ("admin", "observer", "caller-a", "caller-b", "agent-x", "agent-y")


def row(default: str, cells: dict[Who, str] | None = None) -> dict[Who, str]:
    """Every principal's expected answer: `cells` where given, else `default`; the scrape
    token and the anonymous caller get 401 unless `cells` says otherwise."""
    expected = {who: default for who in PRINCIPALS} | {"scraper": "401", None: "401"}
    return expected | (cells or {})


def only(status: str, allowed: tuple[Who, ...], refused: str = "403") -> dict[Who, str]:
    """`status` for the `allowed`, `refused` for every other key."""
    return row(refused, dict.fromkeys(allowed, status))


def seen(*markers: str) -> str:
    """A 200 that showed exactly these of the scene's markers."""
    return "200 " + ",".join(sorted(markers))


EVERYONE = dict.fromkeys(PRINCIPALS, "200")
# The scene's markers: request ids of decisions, names of traces, owners of spans.
A_REQ, B_REQ, X_REQ = "scene-a", "scene-b", "scene-x"
# The registry cells' markers: instances ("x-1@": its transport was shown) and capabilities.
REGISTRY = ("x-1", "x-1@", "y-1", "y-1@", CAPABILITY_1, CAPABILITY_2)

EXPECTED: dict[str, dict[Who, str]] = {
    # observability first: later cells add decisions and traces of their own
    "list decisions": row(
        seen(),
        {
            "admin": seen(A_REQ, B_REQ, X_REQ),
            "observer": seen(A_REQ, B_REQ, X_REQ),
            "caller-a": seen(A_REQ),
            "caller-b": seen(B_REQ),
            "agent-x": seen(X_REQ),
        },
    ),
    "decisions of A's trace": row(
        seen(),
        {
            "admin": seen(A_REQ, X_REQ),
            "observer": seen(A_REQ, X_REQ),
            "caller-a": seen(A_REQ),
            "agent-x": seen(X_REQ),
        },
    ),
    "list traces": row(
        seen(),
        {
            "admin": seen("trace-a", "trace-b"),
            "observer": seen("trace-a", "trace-b"),
            "caller-a": seen("trace-a"),
            "caller-b": seen("trace-b"),
            "agent-x": seen("trace-a"),
        },
    ),
    "read A's trace": row(
        "404",
        {
            "admin": seen("agent-x", "caller-a"),
            "observer": seen("agent-x", "caller-a"),
            "caller-a": seen("caller-a"),
            "agent-x": seen("agent-x"),
        },
    ),
    "list dead letters": only("200", ("admin", "observer")),
    "list queues": only("200", ("admin", "observer")),
    "read the policy": only("200", ("admin", "observer")),
    "scrape metrics": only("200", ("admin", "observer", "scraper")),
    # the registry: what each key may use, and how an instance is reached only for the
    # admin, the observer and the instance's owner ("x-1@": X's transport was shown)
    "list agents": row(
        seen(),
        {
            "admin": seen("x-1", "x-1@", "y-1", "y-1@"),
            "observer": seen("x-1", "x-1@", "y-1", "y-1@"),
            "caller-a": seen("x-1"),
            "caller-b": seen("y-1"),
            "agent-x": seen("x-1", "x-1@", "y-1"),  # it may invoke beta.* (nested calls)
            "agent-y": seen("y-1", "y-1@"),
        },
    ),
    "read an agent": row(
        "404",
        {
            "admin": seen("x-1", "x-1@"),
            "observer": seen("x-1", "x-1@"),
            "caller-a": seen("x-1"),
            "agent-x": seen("x-1", "x-1@"),
            "scraper": "401",
            None: "401",
        },
    ),
    "list capabilities": row(
        seen(),
        {
            "admin": seen(CAPABILITY_1, CAPABILITY_2),
            "observer": seen(CAPABILITY_1, CAPABILITY_2),
            "caller-a": seen(CAPABILITY_1),
            "caller-b": seen(CAPABILITY_2),
            "agent-x": seen(CAPABILITY_1, CAPABILITY_2),
            "agent-y": seen(CAPABILITY_2),
        },
    ),
    "register capability 1": only("201", ("admin", "agent-x")),
    "register capability 2": only("201", ("admin", "agent-y")),
    "heartbeat X's instance": only("200", ("admin", "agent-x")),
    "re-register X's instance": only("201", ("admin", "agent-x")),
    "deregister X's instance": only("204", ("admin", "agent-x")),
    # invocations and routes
    "invoke capability 1": only("200", ("admin", "caller-a")),
    "invoke capability 2": only("200", ("admin", "caller-b", "agent-x")),
    "route to capability 1": only("200", ("admin", "caller-a")),
    "route to capability 2": only("200", ("admin", "caller-b", "agent-x")),
    "route text": only("200", ("admin", "caller-a", "caller-b", "agent-x", "agent-y")),
    # contexts
    "create a context": only("201", ("admin", "caller-a", "caller-b", "agent-x", "agent-y")),
    "read A's context": only("200", ("admin", "caller-a"), "404"),
    "write A's context": only("200", ("admin", "caller-a"), "404"),
    "append to A's context": only("200", ("admin", "caller-a"), "404"),
    "delete A's context": only("204", ("admin", "caller-a"), "404"),
    "read A's context shared with B": only("200", ("admin", "caller-a", "caller-b"), "404"),
    "write A's context shared with B": only("200", ("admin", "caller-a", "caller-b"), "404"),
    "delete A's context shared with B": only("204", ("admin", "caller-a", "caller-b"), "404"),
    "read A's context shared with domain agents": only(
        "200", ("admin", "caller-a", "agent-x", "agent-y"), "404"
    ),
    # each invokes a capability it may invoke (403 where it may invoke none)
    "invoke with A's context": row(
        "404",
        {"admin": "200", "caller-a": "200", "agent-y": "403", "observer": "403"},
    ),
    "route with A's context": row(
        "404",
        {"admin": "200", "caller-a": "200", "agent-y": "403", "observer": "403"},
    ),
    # tasks
    "read A's task": only("200", ("caller-a",), "404"),
    "read A's task naming its owner": only("200", ("admin", "caller-a")),
    # workflow runs: each runs a one-step workflow on a capability it may invoke, if any
    "run a workflow": row(
        "403", {"admin": "200", "caller-a": "200", "caller-b": "200", "agent-x": "200"}
    ),
    "read A's run": only("200", ("caller-a",), "404"),
    "read A's run naming its owner": only("200", ("admin", "caller-a")),
    # A's run has ended: its owner (and an admin naming it) gets 409, nothing is changed
    "cancel A's run": row("404", {"caller-a": "409", "observer": "403"}),
    "cancel A's run naming its owner": only("409", ("admin", "caller-a")),
    "list runs": row(
        seen(),
        {"admin": seen("run-a"), "observer": seen("run-a"), "caller-a": seen("run-a")},
    ),
    # keys
    "create a key": only("201", ("admin",)),
    "list keys": only("200", ("admin",)),
    "revoke a key": only("204", ("admin",)),
    "read one's own key": only("200", KEYS),
    # public
    "dashboard page": EVERYONE,
    "healthz": EVERYONE,
}


@dataclass
class Scene:
    """What the cells look at: A's request (and X's nested call under it), B's request,
    A's task, and each trace id."""

    trace_a: str
    trace_b: str
    task_a: str
    run_a: str

    def markers(self, found: set[str]) -> set[str]:
        names = {self.trace_a: "trace-a", self.trace_b: "trace-b", self.run_a: "run-a"}
        known = {A_REQ, B_REQ, X_REQ, "trace-a", "trace-b", "run-a", *REGISTRY, *KEYS}  # KEYS:
        # span owners
        return {names.get(m, m) for m in found} & known


def set_scene(world: World) -> Scene:
    def invoke(who: str, capability: str, request_id: str, **extra: Any) -> dict[str, Any]:
        body = {"capability": capability, "payload": {}, "request_id": request_id, **extra}
        headers = extra.pop("headers", None)
        body.pop("headers", None)
        answer = world.call(who, "POST", "/v1/invoke", json=body, headers=headers)
        assert answer.status_code in (200, 202), answer.text
        result: dict[str, Any] = answer.json()
        return result

    a = invoke("caller-a", CAPABILITY_1, A_REQ)
    assert a["agent_id"] == "x-1"
    traceparent = world.x.agent.received[-1].headers["traceparent"]  # what X would pass on
    nested = invoke("agent-x", CAPABILITY_2, X_REQ, headers={"traceparent": traceparent})
    assert nested["trace_id"] == a["trace_id"]
    b = invoke("caller-b", CAPABILITY_2, B_REQ)
    task = invoke("caller-a", CAPABILITY_1, "scene-task", mode="async")
    path = f"/v1/tasks/{task['task_id']}"
    wait_until(
        lambda: world.call("caller-a", "GET", path).json()["status"] == "ok", "A's task to run"
    )
    run = world.call("caller-a", "POST", "/v1/workflows/run", json=_workflow(CAPABILITY_1))
    assert run.status_code == 200 and run.json()["status"] == "ok", run.text
    return Scene(a["trace_id"], b["trace_id"], task["task_id"], run.json()["run_id"])


def _workflow(capability: str) -> dict[str, Any]:
    return {"intent": "matrix", "steps": [{"id": "only", "action": capability, "param": {}}]}


Outcome = tuple[int, set[str] | None]  # status, and what of the scene it showed
Action = Callable[[World, Scene, Who, str], Outcome]


def _status(answer: httpx.Response) -> Outcome:
    return answer.status_code, None


def _get(path: str) -> Action:
    return lambda world, _, who, __: _status(world.call(who, "GET", path))


def _post(path: str, body: object) -> Action:
    return lambda world, _, who, __: _status(world.call(who, "POST", path, json=body))


def _shown(path: str, pick: Callable[[dict[str, Any]], set[str]]) -> Callable[..., Action]:
    def act(world: World, scene: Scene, who: Who, _: str) -> Outcome:
        answer = world.call(who, "GET", path.format(scene=scene))
        if answer.status_code != 200:
            return answer.status_code, None
        return 200, scene.markers(pick(answer.json()))

    return lambda: act


def _register(capability: str) -> Action:
    def act(world: World, _: Scene, who: Who, label: str) -> Outcome:
        body = registration(f"m-{label}-{capability.split('.')[0]}", world.x.endpoint, capability)
        return _status(world.call(who, "POST", "/v1/agents", json=body))

    return act


def _x_instance(world: World, label: str) -> str:
    """A fresh instance registered by agent-x, so every cell starts from the same state."""
    victim = f"victim-{label}-{secrets.token_hex(3)}"
    body = registration(victim, world.x.endpoint, CAPABILITY_1)
    assert world.call("agent-x", "POST", "/v1/agents", json=body).status_code == 201
    return victim


def _heartbeat_x(world: World, _: Scene, who: Who, label: str) -> Outcome:
    return _status(world.call(who, "POST", f"/v1/agents/{_x_instance(world, label)}/heartbeat"))


def _reregister_x(world: World, _: Scene, who: Who, label: str) -> Outcome:
    body = registration(_x_instance(world, label), world.x.endpoint, CAPABILITY_1)
    return _status(world.call(who, "POST", "/v1/agents", json=body))


def _deregister_x(world: World, _: Scene, who: Who, label: str) -> Outcome:
    return _status(world.call(who, "DELETE", f"/v1/agents/{_x_instance(world, label)}"))


def _invoke(capability: str) -> Action:
    return lambda world, _, who, __: _status(world.invoke(who, capability))


def _a_context(world: World, share_with: list[str] | None = None) -> str:
    """A fresh context created by caller A (shared as given)."""
    body = {"document": {"user": {"phone": "13800000000"}, "product": {"sku": "X5"}}}
    answer = world.call(
        "caller-a", "POST", "/v1/contexts", json={**body, "share_with": share_with or []}
    )
    assert answer.status_code == 201, answer.text
    context_id: str = answer.json()["context_id"]
    return context_id


def _on_context(method: str, share_with: list[str] | None = None, body: Any = None) -> Action:
    def act(world: World, _: Scene, who: Who, __: str) -> Outcome:
        path = f"/v1/contexts/{_a_context(world, share_with)}"
        return _status(world.call(who, method, path, json=body))

    return act


# What each principal invokes with A's context: a capability it may invoke, if any.
CONTEXT_INVOKES: dict[Who, str] = {"admin": CAPABILITY_1, "caller-a": CAPABILITY_1}


def _invoke_with_a_context(world: World, _: Scene, who: Who, __: str) -> Outcome:
    body = {
        "capability": CONTEXT_INVOKES.get(who, CAPABILITY_2),
        "payload": {},
        "context_id": _a_context(world),
        "suspend": False,
    }
    return _status(world.call(who, "POST", "/v1/invoke", json=body))


def _route_with_a_context(world: World, _: Scene, who: Who, __: str) -> Outcome:
    body = {"capability": CONTEXT_INVOKES.get(who, CAPABILITY_2), "context_id": _a_context(world)}
    return _status(world.call(who, "POST", "/v1/route", json=body))


def _task(owner: str | None) -> Action:
    def act(world: World, scene: Scene, who: Who, __: str) -> Outcome:
        query = "" if owner is None else f"?owner={owner}"
        return _status(world.call(who, "GET", f"/v1/tasks/{scene.task_a}{query}"))

    return act


def _run_workflow(world: World, _: Scene, who: Who, __: str) -> Outcome:
    body = _workflow(CONTEXT_INVOKES.get(who, CAPABILITY_2))
    return _status(world.call(who, "POST", "/v1/workflows/run", json=body))


def _run(owner: str | None) -> Action:
    def act(world: World, scene: Scene, who: Who, __: str) -> Outcome:
        query = "" if owner is None else f"?owner={owner}"
        return _status(world.call(who, "GET", f"/v1/workflows/{scene.run_a}{query}"))

    return act


def _cancel_run(owner: str | None) -> Action:
    def act(world: World, scene: Scene, who: Who, __: str) -> Outcome:
        query = "" if owner is None else f"?owner={owner}"
        return _status(world.call(who, "POST", f"/v1/workflows/{scene.run_a}/cancel{query}"))

    return act


def _run_ids(body: dict[str, Any]) -> set[str]:
    return {r["run_id"] for r in body["runs"]}


def _instance_marks(view: dict[str, Any]) -> set[str]:
    return {view["id"], f"{view['id']}@"} if view["transport"] else {view["id"]}


def _instances(body: dict[str, Any]) -> set[str]:
    return {mark for view in body["agents"] for mark in _instance_marks(view)}


def _capabilities(body: dict[str, Any]) -> set[str]:
    return set(body["capabilities"])


def _create_key(world: World, _: Scene, who: Who, label: str) -> Outcome:
    body = {"principal": f"minted-by-{label}", "role": "admin"}
    return _status(world.call(who, "POST", "/v1/keys", json=body))


def _revoke_key(world: World, _: Scene, who: Who, label: str) -> Outcome:
    throwaway = world.deployment.mint(world.keys["admin"], f"throwaway-{label}", "z", "caller")
    return _status(world.call(who, "DELETE", f"/v1/keys/{throwaway['key_id']}"))


def _request_ids(body: dict[str, Any]) -> set[str]:
    return {d["request_id"] for d in body["decisions"]}


def _trace_ids(body: dict[str, Any]) -> set[str]:
    return {t["trace_id"] for t in body["traces"]}


def _span_owners(body: dict[str, Any]) -> set[str]:
    return {s["principal"] for s in body["spans"]}


ACTIONS: dict[str, Action] = {
    "list decisions": _shown("/v1/decisions?limit=1000", _request_ids)(),
    "decisions of A's trace": _shown(
        "/v1/decisions?limit=1000&trace_id={scene.trace_a}", _request_ids
    )(),
    "list traces": _shown("/v1/traces?limit=1000", _trace_ids)(),
    "read A's trace": _shown("/v1/traces/{scene.trace_a}", _span_owners)(),
    "list dead letters": _get("/v1/deadletters"),
    "list queues": _get("/v1/queues"),
    "read the policy": _get("/v1/policy"),
    "scrape metrics": _get("/metrics"),
    "list agents": _shown("/v1/agents", _instances)(),
    "read an agent": _shown("/v1/agents/x-1", _instance_marks)(),
    "list capabilities": _shown("/v1/capabilities", _capabilities)(),
    "register capability 1": _register(CAPABILITY_1),
    "register capability 2": _register(CAPABILITY_2),
    "heartbeat X's instance": _heartbeat_x,
    "re-register X's instance": _reregister_x,
    "deregister X's instance": _deregister_x,
    "invoke capability 1": _invoke(CAPABILITY_1),
    "invoke capability 2": _invoke(CAPABILITY_2),
    "route to capability 1": _post("/v1/route", {"capability": CAPABILITY_1}),
    "route to capability 2": _post("/v1/route", {"capability": CAPABILITY_2}),
    "route text": _post("/v1/route", {"text": "read the alpha records"}),
    "create a context": _post("/v1/contexts", {"document": {}}),
    "read A's context": _on_context("GET"),
    "write A's context": _on_context("PATCH", body={"merge": {"product": {"sku": "Y9"}}}),
    "append to A's context": _on_context(
        "PATCH", body={"append": {"list": "turns", "items": [{"n": 1}]}}
    ),
    "delete A's context": _on_context("DELETE"),
    "read A's context shared with B": _on_context("GET", ["caller-b"]),
    "write A's context shared with B": _on_context(
        "PATCH", ["caller-b"], {"merge": {"product": None}}
    ),
    "delete A's context shared with B": _on_context("DELETE", ["caller-b"]),
    "read A's context shared with domain agents": _on_context("GET", ["domain:agents"]),
    "invoke with A's context": _invoke_with_a_context,
    "route with A's context": _route_with_a_context,
    "read A's task": _task(None),
    "read A's task naming its owner": _task("caller-a"),
    "run a workflow": _run_workflow,
    "read A's run": _run(None),
    "read A's run naming its owner": _run("caller-a"),
    "cancel A's run": _cancel_run(None),
    "cancel A's run naming its owner": _cancel_run("caller-a"),
    "list runs": _shown("/v1/workflows?limit=200", _run_ids)(),
    "create a key": _create_key,
    "list keys": _get("/v1/keys"),
    "revoke a key": _revoke_key,
    "read one's own key": _get("/v1/keys/self"),
    "dashboard page": _get("/ui/"),
    "healthz": _get("/healthz"),
}


def observed(outcome: Outcome) -> str:
    status, shown = outcome
    return str(status) if shown is None else seen(*shown)


def test_every_principal_gets_exactly_the_answer_the_matrix_gives(
    world: World, report: ReportFactory
) -> None:
    attack = report("access_matrix", "S4 access matrix (principal x resource x action)")
    assert list(ACTIONS) == list(EXPECTED), "every action needs a row, in the same order"
    scene = set_scene(world)
    mismatches = 0
    for action, act in ACTIONS.items():
        for who in PRINCIPALS:
            label = who or "anonymous"
            delivered_before = world.deliveries()
            got = observed(act(world, scene, who, label))
            expected = EXPECTED[action][who]
            if not expected.startswith("2") and world.deliveries() > delivered_before:
                got += " but delivered"  # refused on the wire, yet an agent got the request
            mismatches += got != expected
            attack.record(
                f"{label}: {action}",
                through=(not expected.startswith("2") and got.startswith("2"))
                or "delivered" in got
                or got.startswith("5"),
                principal=label,
                action=action,
                expected=expected,
                observed=got,
            )
    attack.figures["principals"] = len(PRINCIPALS)
    attack.figures["actions"] = len(ACTIONS)
    attack.figures["cells"] = attack.tried
    attack.figures["mismatches"] = mismatches
    attack.assert_nothing_got_through()
    wrong = [c for c in attack.cases if c["expected"] != c["observed"]]
    assert not wrong, f"{len(wrong)} cells differ from the matrix: {wrong}"


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


def test_a_refused_request_leaves_nothing_behind_not_even_a_dead_letter(
    world: World, report: ReportFactory
) -> None:
    attack = report("refused_dead_letters", "S4 refused requests writing dead letters")

    def dead_letters() -> int:
        count: int = world.call("observer", "GET", "/v1/deadletters").json()["count"]
        return count

    before = dead_letters()
    spent = {"x-reach-hop": "0"}
    other_context = world.call("caller-a", "POST", "/v1/contexts", json={}).json()["context_id"]
    for who, body in (
        ("caller-b", {"capability": CAPABILITY_1, "payload": {}}),  # not its capability
        ("observer", {"capability": CAPABILITY_1, "payload": {}}),  # observers only read
        ("caller-b", {"capability": CAPABILITY_2, "payload": {}, "context_id": other_context}),
    ):
        answer = world.call(who, "POST", "/v1/invoke", json=body, headers=spent)
        attack.record(
            f"{who} with a spent hop budget",
            through=answer.status_code not in (403, 404) or dead_letters() != before,
            status=answer.status_code,
        )
    allowed = world.call(
        "caller-b", "POST", "/v1/invoke", json={"capability": CAPABILITY_2}, headers=spent
    )
    assert allowed.status_code == 508 and dead_letters() == before + 1  # the oracle works
    attack.assert_nothing_got_through()
