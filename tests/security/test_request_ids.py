"""One caller's request ids are its own: no other caller polls its tasks or replays its answers."""

from __future__ import annotations

from attack_kit import CAPABILITY_1, CAPABILITY_2, World

from agent_reach.testing.waiting import wait_until


def test_another_caller_can_neither_poll_nor_replay_a_request_id(world: World, report) -> None:
    attack = report("request_ids", "S14 request ids are per principal")
    accepted = world.call(
        "caller-a",
        "POST",
        "/v1/invoke",
        json={"capability": CAPABILITY_1, "request_id": "job-7", "mode": "async"},
    )
    assert accepted.status_code == 202, accepted.text
    wait_until(
        lambda: world.call("caller-a", "GET", "/v1/tasks/job-7").json().get("http_status"),
        "caller A's task to finish",
    )
    polled = world.call("caller-b", "GET", "/v1/tasks/job-7")
    attack.record("poll another caller's task", through=polled.status_code != 404)

    first = world.call(
        "caller-a", "POST", "/v1/invoke", json={"capability": CAPABILITY_1, "request_id": "o-9"}
    )
    assert first.status_code == 200, first.text
    before = len(world.y.agent.received)
    second = world.call(
        "caller-b", "POST", "/v1/invoke", json={"capability": CAPABILITY_2, "request_id": "o-9"}
    )
    attack.record(
        "reuse another caller's request id",
        through=second.status_code != 200
        or second.content == first.content
        or len(world.y.agent.received) != before + 1,
        status=second.status_code,
    )
    attack.assert_nothing_got_through()
