"""Revocation: a key revoked through one coordinator is refused by the other within the
key cache's 1 s (issue 6), even when the other had just verified and cached it.

Polled every 20 ms with a 1.5 s deadline; the report carries the measured
latency. Every request the revoked key gets accepted that was sent more than 1 s after
the revocation was acknowledged counts as got through.
"""

from __future__ import annotations

import time

from attack_kit import ReportFactory, World

from agent_reach.security.service import KEY_CACHE_S
from agent_reach.testing.waiting import wait_until

DEADLINE_S = 1.5


def test_a_revoked_key_is_refused_everywhere_within_a_second(
    world: World, report: ReportFactory
) -> None:
    attack = report("revocation", "S3 revocation latency")
    deployment = world.deployment
    other = deployment.second()
    created = deployment.mint(world.keys["admin"], "leaving", "a", "caller")

    def status_at_the_other() -> int:
        return deployment.call(created["key"], "GET", "/v1/agents", at=other).status_code

    assert status_at_the_other() == 200  # verified there, so cached there
    answer = world.call("admin", "DELETE", f"/v1/keys/{created['key_id']}")
    assert answer.status_code == 204, answer.text
    revoked_at = time.monotonic()
    accepted_late: list[float] = []

    def refused_by_the_other() -> bool:
        # Timed when sent: the other cached the key before the revocation, so a request
        # sent more than KEY_CACHE_S after it reaches an expired entry, however slowly
        # its answer comes back.
        sent = time.monotonic() - revoked_at
        status = status_at_the_other()
        if status == 200 and sent > KEY_CACHE_S:
            accepted_late.append(round(sent, 3))
        return status == 401

    wait_until(refused_by_the_other, "the revoked key to be refused", DEADLINE_S)
    latency_s = time.monotonic() - revoked_at
    attack.record(
        "requests accepted more than 1 s after the revocation",
        through=bool(accepted_late),
        late=accepted_late,
    )
    attack.record(
        "the revoked key still works on the coordinator that revoked it",
        through=world.deployment.call(created["key"], "GET", "/v1/agents").status_code != 401,
    )
    attack.figures.update(
        coordinators=len(deployment.both()),
        latency_ms=round(latency_s * 1000, 1),
    )
    attack.assert_nothing_got_through()
