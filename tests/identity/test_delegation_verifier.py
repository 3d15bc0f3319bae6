"""The SDK's `DelegationVerifier` against a real coordinator's keys.

Tokens come from real deliveries (an agent registered with `"delegation": true`); the
verifier reads the coordinator's JWKS through a counting pass-through on 127.0.0.1, so
the test sees how often it fetched.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response

from agent_reach import DelegationVerifier, ReachError
from agent_reach.clock import ManualClock
from agent_reach.config import Settings
from agent_reach.sdk import delegation
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, run_coordinator

CONCURRENT = 16  # issue 41: a fresh verifier given 2 or 4 at once accepted only one
# Tokens live as long as their request's deadline: a class long enough that none expires
# while the test runs, on a clock set back far enough to sign in two epochs in the past.
POLICY = """
[timeout_classes.held]
timeout_s = 600
"""
CLOCK_BEHIND_S = 90.0
ROTATE_S = 60.0  # the shortest signing epoch AR_DELEGATION_ROTATE_S allows


class CountingProxy:
    """Forwards GETs to the coordinator and counts the JWKS fetches."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.jwks_fetches = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        request = Request(scope, receive)
        if request.url.path == "/.well-known/jwks.json":
            self.jwks_fetches += 1
            await asyncio.sleep(0.05)  # a fetch in flight while the others arrive
        async with httpx.AsyncClient() as client:
            answer = await client.get(self.upstream + request.url.path)
        response = Response(answer.content, answer.status_code, media_type="application/json")
        await response(scope, receive, send)


@pytest.fixture
def clock() -> ManualClock:
    """The coordinator's clock: a second before the end of a signing epoch that ended
    at least `CLOCK_BEHIND_S` ago in real time (the verifier checks `exp` and `iat` on
    the real clock)."""
    wall = (math.floor((time.time() - CLOCK_BEHIND_S) / ROTATE_S) + 1) * ROTATE_S - 1
    return ManualClock(start=wall - ManualClock().wall() + ManualClock().monotonic())


@pytest.fixture
def coordinator(
    backend: str, redis_options: dict[str, str], clock: ManualClock, tmp_path: Path
) -> Iterator[tuple[str, FakeAgent]]:
    """A coordinator (security off) with one agent whose deliveries carry tokens."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    settings = Settings(
        decision_log="off",
        policy_file=policy,
        delegation_rotate_s=ROTATE_S,
        registry_backend=backend,
        **redis_options,
    )
    agent = FakeAgent(name="holder")
    with run_coordinator(settings, clock) as (url, _), ServerThread(agent) as served:
        spec = {
            "id": "holder-1",
            "capabilities": ["order.track"],
            "transport": {"type": "http", "endpoint": f"{served.url}/invoke"},
            "delegation": True,
        }
        assert httpx.post(url + "/v1/agents", json=spec).status_code == 201
        yield url, agent


def _tokens(url: str, agent: FakeAgent, count: int) -> list[str]:
    for n in range(count):
        body = {"capability": "order.track", "payload": {"n": n}, "timeout_class": "held"}
        answer = httpx.post(url + "/v1/invoke", json=body, timeout=10)
        assert answer.status_code == 200, answer.text
    return [r.body["delegation"]["token"] for r in agent.received[-count:]]


async def test_tokens_verified_at_once_by_a_fresh_verifier_share_one_fetch(
    coordinator: tuple[str, FakeAgent],
) -> None:
    url, agent = coordinator
    tokens = _tokens(url, agent, CONCURRENT)
    proxy = CountingProxy(url)
    with ServerThread(proxy) as through:
        verifier = DelegationVerifier(through.url)
        try:
            seen = await asyncio.gather(
                *(verifier.verify(t) for t in tokens), return_exceptions=True
            )
        finally:
            await verifier.aclose()
    refused = [s for s in seen if isinstance(s, BaseException)]
    assert not refused, f"{len(refused)} of {CONCURRENT} refused: {refused[0]}"
    assert (
        sorted(s.request_id for s in seen)
        == sorted(  # type: ignore[union-attr]
            r.body["request_id"] for r in agent.received[-CONCURRENT:]
        )
    )
    assert proxy.jwks_fetches == 1


async def test_a_rotated_key_is_fetched_and_a_made_up_one_is_not(
    coordinator: tuple[str, FakeAgent], clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, agent = coordinator
    before = _tokens(url, agent, 1)[0]
    proxy = CountingProxy(url)
    with ServerThread(proxy) as through:
        verifier = DelegationVerifier(through.url)
        try:
            await verifier.verify(before)
            with pytest.raises(ReachError) as made_up:
                await verifier.verify(_with_kid(before, "made-up"))
            fetches_after_made_up = proxy.jwks_fetches
            clock.advance(2.0)  # into the next epoch: the coordinators' next key
            after = _tokens(url, agent, 1)[0]
            assert _kid(after) != _kid(before)
            monkeypatch.setattr(delegation, "REFETCH_S", 0.0)  # the verifier's 10 s are over
            seen = await verifier.verify(after)
        finally:
            await verifier.aclose()
    assert made_up.value.code == "delegation_invalid"
    assert "does not publish" in str(made_up.value)
    assert fetches_after_made_up == 1  # within REFETCH_S of the first fetch: not asked
    assert seen.request_id == agent.received[-1].body["request_id"]
    assert proxy.jwks_fetches == 2


def _kid(token: str) -> str:
    return str(_header(token)["kid"])


def _header(token: str) -> dict[str, Any]:
    head = token.split(".", 1)[0]
    return dict(json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4))))


def _with_kid(token: str, kid: str) -> str:
    header = {**_header(token), "kid": kid}
    encoded = base64.urlsafe_b64encode(json.dumps(header).encode()).rstrip(b"=").decode()
    return encoded + "." + token.split(".", 1)[1]
