"""S10: what a caller sends beside its request never reaches the agent.

The caller adds credentials, cookies, forwarding and internal headers to an invocation;
the FakeAgent records every header of every delivery. Forbidden: the caller's headers
below and any of their secret values anywhere in the delivery. Required: the contract's
own headers (request id, traceparent, hop, deadline).
"""

from __future__ import annotations

import re
import secrets

from attack_kit import CAPABILITY_1, ReportFactory, World

FORBIDDEN = (
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-real-ip",
    "forwarded",
    "x-reach-context-token",
    "x-reach-internal",
    "x-http-method-override",
    "upgrade",
    "te",
)
REQUIRED = ("x-request-id", "traceparent", "x-reach-hop", "x-reach-deadline-ms")
TRACEPARENT = re.compile(r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")


def test_agents_never_see_caller_credentials_cookies_or_forwarding_headers(
    world: World, report: ReportFactory
) -> None:
    attack = report("header_hygiene", "S10 header hygiene")
    cookie, token = secrets.token_hex(16), secrets.token_hex(16)
    sent = {
        "proxy-authorization": f"Basic {token}",
        "cookie": f"session={cookie}",
        "x-api-key": world.keys["caller-b"],
        "x-forwarded-for": "10.0.0.1, 169.254.169.254",
        "x-forwarded-host": "internal.example",
        "x-real-ip": "10.0.0.1",
        "forwarded": "for=10.0.0.1;host=internal",
        "x-reach-context-token": f"ctx1.{token}",
        "x-reach-internal": "1",
        "x-http-method-override": "DELETE",
        "traceparent": "00-not-a-trace-" + "f" * 40,
    }
    secrets_sent = (world.keys["caller-a"], world.keys["caller-b"], cookie, token)
    before = len(world.x.agent.received)
    answer = world.invoke("caller-a", CAPABILITY_1, headers=sent)
    assert answer.status_code == 200, answer.text
    delivery = world.x.agent.received[before]
    received = delivery.headers
    for name in FORBIDDEN:
        attack.record(f"header {name}", through=name in received, seen=received.get(name))
    everything = repr(received) + repr(delivery.body)
    for n, value in enumerate(secrets_sent):
        attack.record(f"secret value #{n} anywhere in the delivery", through=value in everything)
    for name in REQUIRED:
        attack.record(f"contract header {name} missing", through=name not in received)
    attack.record(
        "traceparent is well-formed",
        through=not TRACEPARENT.match(received.get("traceparent", "")),
        seen=received.get("traceparent"),
    )
    injected = world.call(
        "caller-a",
        "POST",
        "/v1/invoke",
        json={"capability": CAPABILITY_1, "request_id": "r1\r\nx-injected: 1"},
    )
    attack.record(
        "CR/LF in a request id that becomes a header",
        through=injected.status_code != 422 or len(world.x.agent.received) != before + 1,
        status=injected.status_code,
    )
    attack.figures["forbidden_headers_seen"] = sum(
        c["got_through"] for c in attack.cases if c["case"].startswith("header ")
    )
    attack.assert_nothing_got_through()
