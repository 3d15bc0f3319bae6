"""Negotiation's pieces: the combined score, the registration field, the SDK's offer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import ValidationError

from agent_reach import Agent, OfferAnswer
from agent_reach.errors import ValidationFailed
from agent_reach.invoke.negotiation import (
    COST_PENALTY,
    LATE_PENALTY,
    check_negotiate,
    combined_score,
)
from agent_reach.model.agents import AgentSpec
from agent_reach.model.offers import OfferOutcome
from agent_reach.security.endpoints import EndpointGuard


def accepted(
    confidence: float | None = None, eta_ms: float | None = None, cost: float | None = None
) -> OfferOutcome:
    return OfferOutcome("accepted", True, eta_ms, confidence, cost)


def test_the_score_is_scaled_by_the_confidence() -> None:
    assert combined_score(0.8, accepted(confidence=0.5), 1000, None) == pytest.approx(0.4)
    assert combined_score(0.8, accepted(), 1000, None) == pytest.approx(0.8)  # none given: 1


def test_an_eta_past_the_deadline_costs_up_to_the_late_penalty() -> None:
    on_time = combined_score(1.0, accepted(eta_ms=1000), 1000, None)
    half_late = combined_score(1.0, accepted(eta_ms=1500), 1000, None)
    far_late = combined_score(1.0, accepted(eta_ms=10_000), 1000, None)

    assert on_time == pytest.approx(1.0)
    assert half_late == pytest.approx(1.0 - LATE_PENALTY / 2)
    assert far_late == pytest.approx(1.0 - LATE_PENALTY)


def test_the_cost_is_penalized_by_its_share_of_the_budget_left() -> None:
    assert combined_score(1.0, accepted(cost=5), 1000, 10.0) == pytest.approx(
        1.0 - COST_PENALTY / 2
    )
    assert combined_score(1.0, accepted(cost=5), 1000, None) == pytest.approx(1.0)
    assert combined_score(1.0, accepted(cost=0), 1000, 0.0) == pytest.approx(1.0)


def _spec(negotiate: object) -> dict[str, object]:
    return {
        "id": "quoter",
        "capabilities": ["quote.price"],
        "transport": {"endpoint": "http://127.0.0.1:9000/invoke"},
        "negotiate": negotiate,
    }


def test_a_registration_declares_where_and_how_long_to_ask() -> None:
    spec = AgentSpec.model_validate(_spec({"endpoint": "http://127.0.0.1:9000/offer"}))

    assert spec.negotiate is not None
    assert spec.negotiate.timeout_ms == 200
    assert AgentSpec.model_validate({**_spec(None)}).negotiate is None


@pytest.mark.parametrize(
    "negotiate",
    [
        {"endpoint": "http://127.0.0.1:9000/offer", "timeout_ms": 0},
        {"endpoint": "http://127.0.0.1:9000/offer", "timeout_ms": 60_000},
        {"endpoint": "http://127.0.0.1:9000/offer", "retries": 3},
        {"timeout_ms": 200},
    ],
)
def test_a_bad_negotiate_field_is_refused(negotiate: object) -> None:
    with pytest.raises(ValidationError):
        AgentSpec.model_validate(_spec(negotiate))


@pytest.mark.parametrize(
    "endpoint",
    ["ftp://127.0.0.1/offer", "http://user:pw@127.0.0.1/offer", "http://169.254.169.254/"],
)
def test_an_offer_endpoint_is_checked_as_every_endpoint(endpoint: str) -> None:
    spec = AgentSpec.model_validate(_spec({"endpoint": endpoint}))

    with pytest.raises(ValidationFailed) as refused:
        asyncio.run(check_negotiate(spec, EndpointGuard()))
    assert refused.value.code == "endpoint_not_allowed"
    assert refused.value.details["field"] == "negotiate.endpoint"


def test_an_offer_answer_is_an_accept_and_bounded_numbers() -> None:
    assert OfferAnswer.model_validate({"accept": False, "extra": 1}).accept is False
    for bad in ({}, {"accept": True, "confidence": 1.5}, {"accept": True, "cost": -1}):
        with pytest.raises(ValidationError):
            OfferAnswer.model_validate(bad)


def _agent(negotiate: bool | dict[str, Any] = False) -> Agent:
    agent = Agent(
        "quoter", ["quote.price"], coordinator_url="http://127.0.0.1:1", negotiate=negotiate
    )
    agent.endpoint_url = "http://127.0.0.1:9000/invoke"
    return agent


def test_an_sdk_agent_negotiates_once_it_answers_offers() -> None:
    plain, asked = _agent(), _agent(negotiate={"timeout_ms": 350})

    @asked.offer
    def offer(request: object) -> bool:
        return True

    assert plain.spec().negotiate is None
    negotiate = asked.spec().negotiate
    assert negotiate is not None
    assert (negotiate.endpoint, negotiate.timeout_ms) == ("http://127.0.0.1:9000/offer", 350)
    assert _agent(negotiate=True).spec().negotiate is not None
