"""A remote embeddings service that is down, slow or answers garbage never costs a text
request its answer: the packaged encoder (fitted and calibrated beside it) serves, the
decision says so, `/v1/policy` and `/metrics` show the service's health, and once it
answers again it serves again. On memory and Redis."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from remote_encoder_kit import TIMEOUT_S, FakeEmbeddings

from agent_reach.config import Settings
from agent_reach.routing.encoders.remote import FAILURES_TO_DOWN
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_until

MODEL = "fake-model"
REMOTE = f"remote:{MODEL}"
CARDS = {
    "order.track": [
        "where is my order",
        "track my parcel",
        "has my package shipped",
        "order status",
    ],
    "order.cancel": [
        "cancel my order",
        "stop the order",
        "i do not want the order",
        "undo purchase",
    ],
    "weather.today": ["weather today", "will it rain", "is it cold outside", "forecast please"],
    "music.play": ["play a song", "put on some jazz", "play music", "start my playlist"],
    "taxi.book": [
        "book a taxi",
        "call me a cab",
        "ride to the airport",
        "get a car to the station",
    ],
}
# FAILURES_TO_DOWN distinct texts, each one call that fails
FAILING_TEXTS = [f"please cancel the order {n}" for n in ("i made", "from monday", "of shoes")]
assert len(FAILING_TEXTS) == FAILURES_TO_DOWN
REASONS = {
    "slow": "timeout",
    "status_500": "status",
    "wrong_dimension": "malformed",
    "nan": "malformed",
}


@contextmanager
def coordinator(
    settings: Settings, fake: FakeEmbeddings, **extra: object
) -> Iterator[httpx.Client]:
    remote = settings.model_copy(
        update={
            "decision_log": "off",
            "embedding_url": fake.url,
            "embedding_model": MODEL,
            "embedding_timeout_s": TIMEOUT_S,
            **extra,
        }
    )
    with run_coordinator(remote) as (url, _), httpx.Client(base_url=url, timeout=30) as http:
        for tag, examples in CARDS.items():
            body = {
                "id": f"{tag}-1",
                "capabilities": [tag],
                "description": tag.replace(".", " "),
                "examples": examples,
                "transport": {"type": "http", "endpoint": "http://127.0.0.1:9/x"},
            }
            assert http.post("/v1/agents", json=body).status_code == 201
        yield http


def encoder_of(http: httpx.Client) -> dict[str, object]:
    return http.get("/v1/policy").json()["matching"]["encoder"]  # type: ignore[no-any-return]


def ready(http: httpx.Client) -> None:
    wait_until(
        lambda: http.get("/v1/policy").json()["matching"]["current"],
        "every matcher fitted and calibrated",
        timeout_s=60,
    )


def serving(http: httpx.Client, encoder: str) -> None:
    wait_until(lambda: encoder_of(http)["serving"] == encoder, f"{encoder} to serve", 60)


def route(http: httpx.Client, text: str) -> dict[str, object]:
    response = http.post("/v1/route", json={"text": text})
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize("mode", sorted(REASONS))
def test_a_failing_service_leaves_texts_to_the_packaged_encoder_until_it_answers_again(
    settings: Settings, mode: str
) -> None:
    with FakeEmbeddings() as fake, coordinator(settings, fake) as http:
        ready(http)
        assert route(http, "where is my parcel now")["text"]["encoder"] == REMOTE  # type: ignore[index]

        fake.set_mode(mode)
        decision = route(http, FAILING_TEXTS[0])

        assert decision["text"]["encoder"] == "packaged"  # type: ignore[index]
        assert encoder_of(http)["healthy"] is True  # one failure: that text's alone
        for text in FAILING_TEXTS[1:]:
            assert route(http, text)["text"]["encoder"] == "packaged"  # type: ignore[index]
        health = encoder_of(http)
        assert health["healthy"] is False and health["serving"] == "packaged"
        assert str(health["last_error"]).startswith(REASONS[mode])
        metrics = http.get("/metrics").text
        assert f'agent_reach_encoder_up{{encoder="{REMOTE}"}} 0.0' in metrics
        assert f'agent_reach_encoder_calls_total{{outcome="{REASONS[mode]}"}}' in metrics
        assert 'agent_reach_encoder_served_total{encoder="packaged"}' in metrics
        # down: the next texts do not wait for the service, whatever it does
        assert route(http, "is it going to rain")["text"]["encoder"] == "packaged"  # type: ignore[index]

        fake.set_mode("ok")
        serving(http, REMOTE)
        assert route(http, "play me a song")["text"]["encoder"] == REMOTE  # type: ignore[index]
        assert encoder_of(http)["healthy"] is True


def test_a_service_down_at_start_is_fitted_once_it_answers(settings: Settings) -> None:
    with FakeEmbeddings() as fake:
        fake.set_mode("status_500")
        with coordinator(settings, fake) as http:
            ready(http)  # not waiting for the service: the packaged encoder is ready
            decision = route(http, "call me a cab please")
            assert decision["text"]["encoder"] == "packaged"  # type: ignore[index]
            assert decision["capability"] == "taxi.book"
            assert encoder_of(http)["fitted"] is False

            fake.set_mode("ok")
            serving(http, REMOTE)

            assert encoder_of(http)["fitted"] is True
            assert route(http, "book a cab for me")["text"]["encoder"] == REMOTE  # type: ignore[index]


def test_switching_the_model_in_the_policy_refits_with_the_old_fit_serving(
    settings: Settings,
) -> None:
    with FakeEmbeddings() as fake, coordinator(settings, fake) as http:
        ready(http)
        policy = http.put("/v1/policy", json={"embedding": {"model": "fake-model-2"}})
        assert policy.status_code == 200, policy.text
        assert route(http, "where is my package")["text"]["encoder"] in (
            REMOTE,
            "remote:fake-model-2",
        )  # type: ignore[index]

        serving(http, "remote:fake-model-2")
        assert route(http, "stop my order")["text"]["encoder"] == "remote:fake-model-2"  # type: ignore[index]


@pytest.mark.redis
def test_a_coordinator_sharing_the_store_embeds_no_card_text_again(
    redis_url: str, redis_prefix: str
) -> None:
    shared = Settings(registry_backend="redis", redis_url=redis_url, redis_prefix=redis_prefix)
    card_texts = {t for examples in CARDS.values() for t in examples}
    with FakeEmbeddings() as fake:
        with coordinator(shared, fake) as http:
            ready(http)
            serving(http, REMOTE)
        assert card_texts <= set(fake.texts)
        asked_before = len(fake.texts)

        with coordinator(shared, fake, node_id="second") as http:
            ready(http)
            serving(http, REMOTE)

        assert card_texts.isdisjoint(fake.texts[asked_before:])
