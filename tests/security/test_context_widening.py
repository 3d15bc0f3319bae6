"""S16: an agent's own API key cannot widen what its delivery token gives it (issue 16).

Caller A creates `{"user": {"phone"}, "product": {"sku"}}` and invokes agent X, whose
instance reads only `product`. X then tries everything it holds: the token on other
fields and other contexts, its own API key on the caller path (read, patch, delete),
and a nested call passing A's context on to agent Y, whose instance reads `user`.
Only the projection may come back; the document must be unchanged and Y must receive
nothing.
"""

from __future__ import annotations

from typing import Any

from attack_kit import CAPABILITY_1, CAPABILITY_2, ReportFactory, World, registration

PHONE = "13800000000"
DOCUMENT = {"user": {"phone": PHONE}, "product": {"sku": "X5"}}


def _bearer(token: str) -> dict[str, str | bytes]:
    return {"authorization": f"Bearer {token}"}


def test_an_agents_key_cannot_widen_its_delivery_token(world: World, report: ReportFactory) -> None:
    attack = report("context_widening", "S16 an agent's key widening its context token")
    for principal, agent_id, agent, capability, fields in (
        ("agent-x", "x-1", world.x, CAPABILITY_1, ["product"]),
        ("agent-y", "y-1", world.y, CAPABILITY_2, ["user"]),
    ):
        body = registration(agent_id, agent.endpoint, capability, context_fields=fields)
        assert world.deployment.register(world.keys[principal], body).status_code == 201
    created = world.call("caller-a", "POST", "/v1/contexts", json={"document": DOCUMENT})
    other = world.call("caller-a", "POST", "/v1/contexts", json={"document": DOCUMENT})
    context_id, other_id = created.json()["context_id"], other.json()["context_id"]
    invoked = world.call(
        "caller-a",
        "POST",
        "/v1/invoke",
        json={"capability": CAPABILITY_1, "payload": {}, "context_id": context_id},
    )
    assert invoked.status_code == 200, invoked.text
    token = world.x.agent.received[-1].body["context"]["token"]
    path = f"/v1/contexts/{context_id}"

    projection = world.deployment.call(None, "GET", path, headers=_bearer(token))
    assert projection.status_code == 200
    assert projection.json()["document"] == {"product": {"sku": "X5"}}  # the token works

    def leaked(answer: Any) -> bool:
        return answer.status_code < 300 and PHONE.encode() in answer.content

    tries: list[tuple[str, str | None, str, str, dict[str, Any]]] = [
        # (case, whose key, method, path, request options)
        ("token asks for user", None, "GET", f"{path}?fields=user", {"headers": _bearer(token)}),
        ("token opens another context", None, "GET", f"/v1/contexts/{other_id}",
         {"headers": _bearer(token)}),
        ("token writes user", None, "PATCH", path,
         {"headers": _bearer(token), "json": {"merge": {"user": {"phone": "1"}}}}),
        ("token deletes", None, "DELETE", path, {"headers": _bearer(token)}),
        ("key reads", "agent-x", "GET", path, {}),
        ("key reads user", "agent-x", "GET", f"{path}?fields=user", {}),
        ("key patches", "agent-x", "PATCH", path, {"json": {"merge": {"user": None}}}),
        ("key appends", "agent-x", "PATCH", path,
         {"json": {"append": {"list": "notes", "items": ["x"]}}}),
        ("key deletes", "agent-x", "DELETE", path, {}),
        ("key with the token header reads user", "agent-x", "GET", f"{path}?fields=user",
         {"headers": {"x-reach-context-token": token}}),
    ]  # fmt: skip
    expected = {
        "token asks for user": 200,  # an empty projection
        "token opens another context": 404,
        "token writes user": 422,
        "token deletes": 401,  # deleting is on the caller path only
        "key with the token header reads user": 200,  # the token decides: empty again
    }
    for case, principal, method, target, options in tries:
        key = None if principal is None else world.keys[principal]
        answer = world.deployment.call(key, method, target, **options)
        want = expected.get(case, 404)
        attack.record(
            case,
            through=leaked(answer) or answer.status_code != want,
            status=answer.status_code,
            expected=want,
        )

    delivered_to_y = len(world.y.agent.received)
    nested = world.call(
        "agent-x",
        "POST",
        "/v1/invoke",
        json={"capability": CAPABILITY_2, "payload": {}, "context_id": context_id},
    )
    attack.record(
        "nested call passes A's context on to Y",
        through=nested.status_code != 404 or len(world.y.agent.received) != delivered_to_y,
        status=nested.status_code,
        code=nested.json()["error"]["code"] if nested.status_code >= 400 else None,
    )
    after = world.call("caller-a", "GET", path).json()["document"]
    attack.record("A's document unchanged", through=after != DOCUMENT, document=after)
    attack.figures["tries"] = attack.tried
    attack.assert_nothing_got_through()
