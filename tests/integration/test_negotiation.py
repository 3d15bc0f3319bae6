"""Negotiation end to end: SDK agents that answer offers before any delivery.

Real HTTP agents on 127.0.0.1, a real coordinator on memory and on Redis. Each agent
counts what its handler executed and what its offer endpoint was asked; agents accept
(with a confidence, an eta, a cost), decline, stay silent past the offer timeout, or
accept and then fail the delivery. The oracle is those counts, the answer, and the
decision's offers.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from agent_reach import Agent, AgentRequest, OfferAnswer, OfferRequest
from agent_reach.model.quality import PRIOR
from agent_reach.sdk.agent import RetryLater
from agent_reach.testing.servers import ServerThread, stop_all
from agent_reach.testing.waiting import wait_until

CAPABILITY = "quote.price"
SECRET = "card-4111-1111"  # in the payload and the context: never in an offer


@dataclass
class Behaviour:
    """How one agent answers: its offer (None: silent), its weight, and its delivery."""

    offer: OfferAnswer | None
    weight: float = 1.0
    fails: bool = False  # accepts, then answers its delivery 503 (try another)
    generic: bool = False
    negotiates: bool = True
    gate: threading.Event | None = None  # its handler waits for it before answering


@dataclass
class Fleet:
    """What the agents saw: executions and offer requests per agent."""

    executed: Counter[str] = field(default_factory=Counter)
    asked: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    release: threading.Event = field(default_factory=threading.Event)


def accept(confidence: float | None = None, **extra: Any) -> OfferAnswer:
    return OfferAnswer(accept=True, confidence=confidence, **extra)


DECLINE = OfferAnswer(accept=False)
SILENT = None
SILENT_TIMEOUT_MS = 300


def offer_timeout_ms(behaviour: Behaviour) -> int:
    """Generous for an agent that answers (a loaded host), short for a silent one."""
    return SILENT_TIMEOUT_MS if behaviour.offer is None else 3000


@contextmanager
def fleet(coordinator: str, behaviours: dict[str, Behaviour]) -> Iterator[Fleet]:
    """Start one SDK agent per behaviour and wait until every one is healthy."""
    seen = Fleet()
    servers: list[ServerThread] = []

    def build(agent_id: str, behaviour: Behaviour) -> Agent:
        capabilities = ["general.help"] if behaviour.generic else [CAPABILITY]
        agent = Agent(
            agent_id,
            capabilities,
            coordinator_url=coordinator,
            weight=behaviour.weight,
            generic=behaviour.generic,
            negotiate=behaviour.negotiates and {"timeout_ms": offer_timeout_ms(behaviour)},
        )

        @agent.handler
        async def handle(request: AgentRequest) -> dict[str, Any]:
            seen.executed[agent_id] += 1
            if behaviour.gate is not None:
                await asyncio.to_thread(behaviour.gate.wait, 30)
            if behaviour.fails:
                raise RetryLater("not now after all")
            return {"by": agent_id}

        if behaviour.negotiates:

            @agent.offer
            async def offer(asked: OfferRequest) -> OfferAnswer:
                seen.asked.setdefault(agent_id, []).append(asked.model_dump())
                if behaviour.offer is None:  # silent: answers only once the test is over
                    await asyncio.to_thread(seen.release.wait, 30)
                    return DECLINE
                return behaviour.offer

        return agent

    try:
        for agent_id, behaviour in behaviours.items():
            agent = build(agent_id, behaviour)
            server = ServerThread(agent.app)
            agent.endpoint_url = f"{server.url}/invoke"
            servers.append(server.start())
        with httpx.Client(base_url=coordinator, timeout=10) as http:

            def all_healthy() -> bool:
                views = http.get("/v1/agents").json()["agents"]
                return len(views) == len(behaviours) and all(
                    v["status"] == "healthy" for v in views
                )

            wait_until(all_healthy, "every agent registered and probed healthy")
        yield seen
    finally:
        seen.release.set()
        for behaviour in behaviours.values():
            if behaviour.gate is not None:
                behaviour.gate.set()
        stop_all(servers)


def invoke(coordinator: str, headers: dict[str, str] | None = None, **body: Any) -> httpx.Response:
    with httpx.Client(base_url=coordinator, timeout=10) as http:
        return http.post(
            "/v1/invoke",
            json={"capability": CAPABILITY, "payload": {}, **body},
            headers=headers,
        )


def offers_of(route: dict[str, Any]) -> dict[str, Any]:
    """Each candidate's offer as the decision shows it (None: not negotiated)."""
    return {c["agent_id"]: c["offer"] for c in route["candidates"]}


def test_the_choice_follows_the_offers_and_delivers_once(coordinator: str) -> None:
    behaviours = {
        "accepts": Behaviour(accept(0.9, eta_ms=50, cost=1)),
        "declines": Behaviour(DECLINE, weight=3.0),  # the best score: it would win unasked
        "silent": Behaviour(SILENT, weight=2.0),
    }
    with fleet(coordinator, behaviours) as seen, httpx.Client(base_url=coordinator) as http:
        answer = invoke(coordinator)
        (listed,) = http.get("/v1/decisions", params={"limit": 1}).json()["decisions"]

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert listed["decision"] == body["route"]  # GET /v1/decisions shows the offers too
    assert (body["agent_id"], body["status"], body["result"]) == (
        "accepts",
        "ok",
        {"by": "accepts"},
    )
    assert seen.executed == {"accepts": 1}  # executed once in all, nowhere else
    assert {a: len(asked) for a, asked in seen.asked.items()} == {
        "accepts": 1,
        "declines": 1,
        "silent": 1,
    }
    route = body["route"]
    offers = offers_of(route)
    assert offers["accepts"]["outcome"] == "accepted"
    assert offers["accepts"]["confidence"] == 0.9
    assert offers["declines"]["outcome"] == "declined"
    assert offers["silent"]["outcome"] == "timeout"
    scores = {c["agent_id"]: c["score"] for c in route["candidates"]}
    assert scores["declines"] > scores["silent"] > scores["accepts"]
    assert offers["accepts"]["combined"] == pytest.approx(scores["accepts"] * 0.9, abs=1e-5)
    assert route["agent_id"] == "accepts"
    negotiation = route["negotiation"]
    assert sorted(negotiation["asked"]) == ["accepts", "declines", "silent"]
    assert sorted(negotiation["turned_down"]) == ["declines", "silent"]
    assert negotiation["fallback"] is None
    assert [a["agent_id"] for a in body["attempts"]] == ["accepts"]


def test_a_higher_confidence_beats_a_better_score(coordinator: str) -> None:
    behaviours = {
        "sure": Behaviour(accept(1.0)),
        "unsure": Behaviour(accept(0.3), weight=1.5),
    }
    with fleet(coordinator, behaviours) as seen:
        answer = invoke(coordinator)

    body = answer.json()
    scores = {c["agent_id"]: c["score"] for c in body["route"]["candidates"]}
    assert scores["unsure"] > scores["sure"]
    assert body["agent_id"] == "sure"
    assert seen.executed == {"sure": 1}


def test_failed_deliveries_fall_back_to_other_acceptors_then_generic_never_a_decliner(
    coordinator: str,
) -> None:
    behaviours = {
        "first": Behaviour(accept(1.0), weight=2.0, fails=True),
        "second": Behaviour(accept(0.8), fails=True),
        "declines": Behaviour(DECLINE, weight=3.0),
        "catch-all": Behaviour(None, generic=True, negotiates=False),
    }
    with fleet(coordinator, behaviours) as seen:
        answer = invoke(coordinator)

    body = answer.json()
    assert (body["agent_id"], body["status"]) == ("catch-all", "fallback"), answer.text
    assert seen.executed == {"first": 1, "second": 1, "catch-all": 1}
    assert [a["agent_id"] for a in body["attempts"]] == ["first", "second", "catch-all"]


def test_when_everyone_declines_the_generic_agent_takes_it(coordinator: str) -> None:
    behaviours = {
        "declines": Behaviour(DECLINE),
        "silent": Behaviour(SILENT),
        "catch-all": Behaviour(None, generic=True, negotiates=False),
    }
    with fleet(coordinator, behaviours) as seen:
        answer = invoke(coordinator)

    body = answer.json()
    assert (body["agent_id"], body["status"]) == ("catch-all", "fallback"), answer.text
    assert seen.executed == {"catch-all": 1}
    assert body["route"]["negotiation"]["fallback"] == "generic"
    assert body["route"]["agent_id"] is None


def test_when_everyone_declines_without_a_generic_agent_it_is_all_declined(
    coordinator: str,
) -> None:
    behaviours = {"declines": Behaviour(DECLINE), "silent": Behaviour(SILENT)}
    with fleet(coordinator, behaviours) as seen:
        answer = invoke(coordinator)
        with httpx.Client(base_url=coordinator) as http:
            metrics = http.get("/metrics").text
            views = http.get("/v1/agents").json()["agents"]

    assert answer.status_code == 503, answer.text
    error = answer.json()["error"]
    assert error["code"] == "all_declined"
    outcomes = {o["agent_id"]: o["offer"]["outcome"] for o in error["offers"]}
    assert outcomes == {"declines": "declined", "silent": "timeout"}
    assert seen.executed == {}
    assert 'agent_reach_offers_total{outcome="declined"} 1.0' in metrics
    assert 'agent_reach_offers_total{outcome="timeout"} 1.0' in metrics
    # Each turned it down: a `declined` outcome in its quality, the factor below the prior's.
    quality = {v["id"]: v["quality"] for v in views}
    assert {a: q["outcomes"] for a, q in quality.items()} == {
        "declines": {"declined": 1},
        "silent": {"declined": 1},
    }
    assert all(q["factor"] < PRIOR.quality for q in quality.values())


def test_a_repeated_request_id_goes_back_where_it_may_have_acted_unasked(
    coordinator: str,
) -> None:
    gate = threading.Event()
    behaviours = {
        "slow": Behaviour(accept(1.0), weight=2.0, gate=gate),
        "other": Behaviour(accept(0.5)),
    }
    with fleet(coordinator, behaviours) as seen:
        first = invoke(coordinator, request_id="quote-7", headers={"x-reach-deadline-ms": "1500"})
        assert first.status_code == 504, first.text  # slow may have acted: outcome unknown
        behaviours["slow"].offer = DECLINE  # it would decline now, but it holds the id
        gate.set()
        again = invoke(coordinator, request_id="quote-7")

    assert (again.json()["agent_id"], again.json()["result"]) == ("slow", {"by": "slow"})
    assert seen.executed == {"slow": 1}  # its own memory of the id answered the repeat
    assert {a: len(asked) for a, asked in seen.asked.items()} == {"slow": 1, "other": 1}


def test_an_offer_over_the_budget_left_is_refused(coordinator: str) -> None:
    behaviours = {
        "dear": Behaviour(accept(1.0, cost=50), weight=2.0),
        "cheap": Behaviour(accept(1.0, cost=2)),
    }
    with fleet(coordinator, behaviours) as seen:
        answer = invoke(coordinator, budget=10)

    body = answer.json()
    assert body["agent_id"] == "cheap", answer.text
    offers = offers_of(body["route"])
    assert offers["dear"]["outcome"] == "over_budget"
    assert seen.asked["cheap"][0]["budget_left"] == 10
    assert seen.executed == {"cheap": 1}


def test_an_offer_carries_no_context_and_no_payload(coordinator: str) -> None:
    behaviours = {"accepts": Behaviour(accept(1.0))}
    with fleet(coordinator, behaviours) as seen, httpx.Client(base_url=coordinator) as http:
        made = http.post("/v1/contexts", json={"document": {"card": SECRET}})
        assert made.status_code == 201, made.text
        answer = invoke(coordinator, payload={"card": SECRET}, context_id=made.json()["context_id"])

    assert answer.status_code == 200, answer.text
    (asked,) = seen.asked["accepts"]
    assert set(asked) == {"capability", "text", "params", "deadline_ms", "budget_left"}
    assert asked["capability"] == CAPABILITY
    assert 0 < asked["deadline_ms"] <= 30_000
    assert SECRET not in repr(asked)


def test_agents_that_do_not_negotiate_take_part_with_their_score(coordinator: str) -> None:
    behaviours = {
        "declines": Behaviour(DECLINE, weight=3.0),
        "plain": Behaviour(None, negotiates=False),
    }
    with fleet(coordinator, behaviours) as seen:
        answer = invoke(coordinator)

    body = answer.json()
    assert body["agent_id"] == "plain", answer.text
    assert offers_of(body["route"])["plain"] is None
    assert seen.executed == {"plain": 1}
    assert "plain" not in seen.asked


def test_an_offer_endpoint_outside_the_allowed_networks_is_refused(coordinator: str) -> None:
    spec = {
        "id": "sneaky",
        "capabilities": [CAPABILITY],
        "transport": {"endpoint": "http://127.0.0.1:9/invoke"},
        "negotiate": {"endpoint": "http://169.254.169.254/latest/meta-data", "timeout_ms": 200},
    }
    with httpx.Client(base_url=coordinator, timeout=10) as http:
        answer = http.post("/v1/agents", json=spec)

    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "endpoint_not_allowed"
    assert answer.json()["error"]["field"] == "negotiate.endpoint"
