"""The retry budget: when many requests fail at once, only a bounded share is retried.

Retries in flight may not exceed `retry_budget_ratio` (0.2) x requests in flight, and at
least `retry_budget_min` (3) are always allowed (Envoy's and Linkerd's retry budgets).
Twenty requests are held at an instance that then answers 500 to all of them at once;
the other instance holds what reaches it. With 20 in flight, 4 may be retried: the
other 16 get the instance's failure at once instead of doubling the load on the only
instance left, and each is counted in `agent_reach_retry_budget_exhausted_total`.
"""

from __future__ import annotations

import re
import threading

import httpx

from agent_reach.testing.waiting import wait_all_healthy, wait_until

IN_FLIGHT = 20
ALLOWED = 4  # max(retry_budget_min 3, 0.2 x 20 in flight)
EXHAUSTED = re.compile(r"^agent_reach_retry_budget_exhausted_total (\S+)$", re.MULTILINE)


def exhausted(http: httpx.Client) -> float:
    found = EXHAUSTED.search(http.get("/metrics").text)
    assert found is not None, "agent_reach_retry_budget_exhausted_total is not exported"
    return float(found.group(1))


def test_a_burst_of_failures_retries_only_what_the_budget_allows(http, register, gated_agents):
    failing, failing_endpoint = gated_agents(name="failing", status=500)
    spare, spare_endpoint = gated_agents(name="spare")
    # The failing instance ranks first for every request (weight), so all 20 go to it;
    # "reasoning" gives each delivery 5 s, time enough to hold 20 of them.
    for agent_id, endpoint, weight in (
        ("failing-1", failing_endpoint, 1.0),
        ("spare-1", spare_endpoint, 0.2),
    ):
        answer = register(agent_id, endpoint, "burst.act", weight=weight, timeout_class="reasoning")
        assert answer.status_code == 201, answer.text
    wait_all_healthy(http)
    before = exhausted(http)
    answers: list[httpx.Response] = []

    def call(n: int) -> None:
        with httpx.Client(base_url=str(http.base_url), timeout=15) as own:
            answers.append(
                own.post("/v1/invoke", json={"capability": "burst.act", "payload": {"n": n}})
            )

    threads = [threading.Thread(target=call, args=(n,)) for n in range(IN_FLIGHT)]
    for thread in threads:
        thread.start()
    wait_until(
        lambda: len(failing.received) == IN_FLIGHT,
        f"{IN_FLIGHT} requests held at the failing instance",
    )
    assert spare.received == []
    failing.gate.set()  # 20 failures at once
    # Answered at once: the requests refused a retry. Held at the spare: the retried ones.
    wait_until(
        lambda: (len(answers), len(spare.received)) == (IN_FLIGHT - ALLOWED, ALLOWED),
        f"{IN_FLIGHT - ALLOWED} answers and {ALLOWED} retries held at the spare",
    )
    spare.gate.set()
    for thread in threads:
        thread.join()

    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] * ALLOWED + [502] * (IN_FLIGHT - ALLOWED), statuses
    refused = [a.json()["error"] for a in answers if a.status_code == 502]
    assert {e["code"] for e in refused} == {"agent_error"}
    assert len(spare.received) == ALLOWED, "a request refused a retry reached the spare later"
    assert exhausted(http) - before == IN_FLIGHT - ALLOWED
