"""S13: a principal over its quota (10 per minute, burst 10) tries to get more.

One bucket per principal and capability, taken in one atomic backend operation, so the
oracle is the token bucket's bound over the whole test: accepted <= burst + rate x
elapsed, whatever the attacker spreads its requests over. Attempts: both coordinators
(Redis; memory has one), spelling variants of its key (401, never a fresh bucket), and
more keys for the same principal (they share its bucket).
"""

from __future__ import annotations

import math
import time
from collections import Counter

from attack_kit import (
    CAPABILITY_1,
    QUOTA_BURST,
    QUOTA_CALLER,
    QUOTA_RATE_PER_S,
    Deployment,
    ReportFactory,
    World,
)

REQUESTS_PER_COORDINATOR = 15


def _variants(key: str) -> dict[str, str]:
    """Spellings of `key` an attacker hopes count as another key."""
    _, key_id, secret = key.split("_", 2)
    return {
        "upper case": key.upper(),
        "swapped case": key.swapcase(),
        "prefix case": "AR_" + key[3:],
        "space inside": key[:10] + " " + key[10:],
        "tab inside": key[:10] + "\t" + key[10:],
        "zero-width space": key[:10] + "\u200b" + key[10:],
        "full-width letter": key[:-1] + chr(ord("Ａ")),
        "extra character": key + "x",
        "last character dropped": key[:-1],
        "secret only": secret,
        "id only": f"ar_{key_id}",
        "percent-encoded underscore": key.replace("_", "%5F"),
        "doubled": key + key,
    }


def test_a_principal_gets_no_more_than_its_quota_however_it_spreads_its_requests(
    world: World, report: ReportFactory
) -> None:
    attack = report("quota_evasion", "S13 quota evasion")
    deployment: Deployment = world.deployment
    admin = world.keys["admin"]
    key = deployment.mint(admin, QUOTA_CALLER, "a", "caller")["key"]
    coordinators = deployment.both()
    started = time.monotonic()
    accepted = Counter[str]()

    retry_after: set[str | None] = set()

    def invoke(label: str, authorization: str, at: int) -> int:
        answer = deployment.call(
            None,
            "POST",
            "/v1/invoke",
            json={"capability": CAPABILITY_1, "suspend": False},
            at=coordinators[at % len(coordinators)],
            headers={"authorization": authorization.encode()},
        )
        accepted[label] += answer.status_code == 200
        if answer.status_code == 429:
            retry_after.add(answer.headers.get("retry-after"))
        return answer.status_code

    def beyond_the_bucket() -> bool:
        """More accepted so far than the shared bucket can have granted by now (a 200
        within it may be a refilled token: one every 1/rate seconds, 6 s here)."""
        allowed = QUOTA_BURST + math.floor(QUOTA_RATE_PER_S * (time.monotonic() - started))
        return sum(accepted.values()) > allowed

    statuses = Counter(
        invoke("spread over coordinators", f"Bearer {key}", n)
        for n in range(REQUESTS_PER_COORDINATOR * len(coordinators))
    )
    assert statuses[429] > 0, "the quota never answered 429"
    assert None not in retry_after, "a 429 without Retry-After"
    for name, variant in _variants(key).items():
        status = invoke(name, f"Bearer {variant}", 0)
        attack.record(f"key variant: {name}", through=status != 401, status=status)
    extra_keys = [deployment.mint(admin, QUOTA_CALLER, "a", "caller")["key"] for _ in range(3)]
    for n, extra in enumerate(extra_keys):
        status = invoke("more keys of the principal", f"Bearer {extra}", n)
        attack.record(
            f"another key of the principal #{n}",
            through=status == 200 and beyond_the_bucket(),
            status=status,
        )
    for spelling in (f"bearer {key}", f"BEARER {key}", f"Bearer \t {key}"):
        status = invoke("same key, other header spelling", spelling, 1)
        attack.record(
            f"header spelling {spelling[:9]!r}",
            through=status == 200 and beyond_the_bucket(),
            status=status,
        )
    elapsed = time.monotonic() - started
    bound = QUOTA_BURST + math.floor(QUOTA_RATE_PER_S * elapsed)
    total = sum(accepted.values())
    attack.record(
        f"accepted over the whole test <= {bound}",
        through=total > bound,
        accepted=dict(accepted),
        elapsed_s=round(elapsed, 3),
    )
    attack.figures.update(
        coordinators=len(coordinators),
        accepted=total,
        bound=bound,
        over_admission=max(0, total - bound),
        statuses_when_spread=dict(statuses),
    )
    attack.assert_nothing_got_through()
