"""`why` shows a caller its own requests only; admins see every request and its values."""

from __future__ import annotations

from attack_kit import CAPABILITY_1, CAPABILITY_2, World

# Caller A's secret: letters, so no trace id, node id, time or latency can contain it.
CARD = "card-number-of-caller-a"


def test_another_principal_cannot_walk_a_request_and_admins_can(world: World, report) -> None:
    attack = report("why_access", "S4 why walks only the caller's own requests")
    mine = world.call(
        "caller-a",
        "POST",
        "/v1/invoke",
        json={"capability": CAPABILITY_1, "request_id": "w-1", "payload": {"card": CARD}},
    )
    assert mine.status_code == 200, mine.text
    theirs = world.call(
        "caller-b", "POST", "/v1/invoke", json={"capability": CAPABILITY_2, "request_id": "w-1"}
    )
    assert theirs.status_code == 200, theirs.text

    own = world.call("caller-a", "GET", "/v1/requests/w-1/why")
    assert own.status_code == 200, own.text
    delivery = own.json()["steps"][3]
    assert delivery["result"]["echo"] == {"card": CARD}
    assert own.json()["steps"][0]["decision"]["capability"] == CAPABILITY_1

    other = world.call("caller-b", "GET", "/v1/requests/w-1/why")
    attack.record(
        "walk another caller's request",
        through=other.status_code != 200 or CARD in other.text,
        status=other.status_code,
    )
    assert other.json()["steps"][0]["decision"]["capability"] == CAPABILITY_2  # its own w-1
    for principal in ("agent-x", None):
        seen = world.call(principal, "GET", "/v1/requests/w-1/why")
        attack.record(f"walk as {principal}", through=seen.status_code < 400 or CARD in seen.text)

    observer = world.call("observer", "GET", "/v1/requests/w-1/why")
    assert observer.status_code == 200, observer.text  # every request, but not its content
    assert observer.json()["values_shown"] is False
    attack.record("observer reads a request's result", through=CARD in observer.text)

    admin = world.call("admin", "GET", "/v1/requests/w-1/why")
    assert admin.status_code == 200, admin.text
    assert admin.json()["values_shown"] is True
    attack.assert_nothing_got_through()
