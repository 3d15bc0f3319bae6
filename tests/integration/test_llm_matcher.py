"""The LLM matcher against a real local server speaking OpenAI chat completions."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_reach.backends.protocols import InstanceRecord
from agent_reach.clock import ManualClock
from agent_reach.config import Settings
from agent_reach.model.agents import AgentSpec
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.matchers.llm import LlmMatcher
from agent_reach.routing.matchers.pipeline import MatchingPipeline
from agent_reach.testing.servers import ServerThread

API_KEY = "sk-test-key"
CARDS = {
    "logistics.track": ("物流查询：快递到哪了", ["我的快递到哪了", "包裹怎么还没送到"]),
    "order.manage": ("订单管理：取消订单、修改订单", ["我想取消订单", "修改订单地址"]),
}
POLICY = Policy(matchers=["lexical", "llm"], confident_at={"lexical": 0.6}, match_cache_s=0)
SURE_TEXT = "我的快递到哪了"  # an example verbatim: the lexical matcher is confident
UNSURE_TEXT = "帮我处理一下上周那笔"  # shares almost nothing with any card


@dataclass
class FakeLlm:
    """`POST /v1/chat/completions` answering `content` (or hanging until the client leaves)."""

    content: str = ""
    status: int = 200
    hang: bool = False
    received: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    async def completions(self, request: Request) -> Response:
        body = await request.json()
        self.received.append(body)
        self.headers.append(dict(request.headers))
        if self.hang:
            await request.receive()  # returns http.disconnect once the client gives up
            return Response(status_code=499)
        message = {"role": "assistant", "content": self.content}
        answer = {"object": "chat.completion", "choices": [{"index": 0, "message": message}]}
        return JSONResponse(answer, status_code=self.status)


@pytest.fixture
def llm() -> Iterator[tuple[FakeLlm, str]]:
    fake = FakeLlm()
    app = Starlette(routes=[Route("/v1/chat/completions", fake.completions, methods=["POST"])])
    with ServerThread(app) as server:
        yield fake, f"{server.url}/v1"


# A test that expects an answer gives the LLM all the time a loaded host may need; only
# the timeout test waits out a short timeout (it parametrizes this fixture down).
ANSWER_TIMEOUT_S = 30.0


@pytest.fixture
def llm_timeout_s() -> float:
    return ANSWER_TIMEOUT_S


@pytest.fixture
async def pipeline(llm: tuple[FakeLlm, str], llm_timeout_s: float) -> Any:
    index = RegistryIndex()
    for tag, (description, examples) in CARDS.items():
        spec = AgentSpec(
            id=tag.replace(".", "-"),
            capabilities=[tag],
            description=description,
            examples=examples,
            transport={"endpoint": "http://127.0.0.1:1/"},
        )
        index.upsert(InstanceRecord(spec, 0.0), 1e9)
    settings = Settings(
        llm_url=llm[1], llm_model="tiny-router", llm_api_key=API_KEY, llm_timeout_s=llm_timeout_s
    )
    matching = MatchingPipeline(index, ManualClock(), settings)
    yield matching
    await matching.aclose()


async def test_the_llm_is_asked_only_when_the_lexical_matcher_is_unsure(llm, pipeline):
    fake, _ = llm
    fake.content = '{"capability": "order.manage", "confidence": 0.9}'
    await pipeline.ready(POLICY)
    sure = (await pipeline.match(SURE_TEXT, POLICY)).matches
    assert sure[0].capability == "logistics.track"
    assert fake.received == []
    unsure = (await pipeline.match(UNSURE_TEXT, POLICY)).matches
    assert len(fake.received) == 1
    assert unsure[0].capability == "order.manage"
    assert unsure[0].scores["llm"] == 0.9
    assert set(unsure[0].scores) == {"lexical", "raw", "llm"}
    request = fake.received[0]
    assert request["model"] == "tiny-router"
    assert request["messages"][-1] == {"role": "user", "content": UNSURE_TEXT}
    assert "logistics.track: 物流查询" in request["messages"][0]["content"]
    assert fake.headers[0]["authorization"] == f"Bearer {API_KEY}"


@pytest.mark.parametrize(
    ("content", "status"),
    [
        ("I think it is about an order.", 200),
        ('{"capability": "refund.status", "confidence": 0.9}', 200),
        ('{"capability": "order.manage", "confidence": "very"}', 200),
        ('{"capability": "order.manage", "confidence": 7}', 200),
        ('["order.manage"]', 200),
        ('{"error": "overloaded"}', 503),
    ],
)
async def test_garbage_answers_count_as_no_opinion(llm, pipeline, content, status):
    fake, _ = llm
    fake.content, fake.status = content, status
    await pipeline.ready(POLICY)
    matches = (await pipeline.match(UNSURE_TEXT, POLICY)).matches
    assert len(fake.received) == 1
    assert all("llm" not in m.scores for m in matches)  # no opinion: left out of the blend
    assert all(m.scores["raw"] == m.scores["lexical"] for m in matches)


async def test_a_json_answer_wrapped_in_prose_is_understood(llm, pipeline):
    fake, _ = llm
    fake.content = 'Sure! ```json\n{"capability": "order.manage", "confidence": 0.8}\n```'
    await pipeline.ready(POLICY)
    matches = (await pipeline.match(UNSURE_TEXT, POLICY)).matches
    assert matches[0].capability == "order.manage"


@pytest.mark.parametrize("llm_timeout_s", [0.3])
async def test_a_timeout_counts_as_no_opinion(llm, pipeline):
    fake, _ = llm
    fake.hang = True
    await pipeline.ready(POLICY)
    matches = (await pipeline.match(UNSURE_TEXT, POLICY)).matches
    assert len(fake.received) == 1
    assert all("llm" not in m.scores for m in matches)


ORDER_SCHEMA = {
    "order_no": {"type": "string", "pattern": "[0-9]{3,}"},
    "reason": {"type": "string", "enum": ["damaged", "late", "wrong item"]},
    "urgent": {"type": "boolean"},
}


async def test_the_llm_fills_params_the_patterns_could_not_and_nothing_that_breaks_the_schema(
    llm,
):
    fake, url = llm
    fake.content = (
        'Here you go: {"order_no": "A12", "reason": "late", "urgent": true, "extra": "x"}'
    )
    matcher = LlmMatcher(
        Settings(llm_url=url, llm_model="tiny-router", llm_timeout_s=ANSWER_TIMEOUT_S)
    )
    try:
        filled = await matcher.fill_params("上周的订单太慢了，急！", ORDER_SCHEMA)
    finally:
        await matcher.aclose()
    # "A12" breaks the order_no pattern and "extra" is no property: both are dropped
    assert filled == {"reason": "late", "urgent": True}
    request = fake.received[0]
    assert request["messages"][-1] == {"role": "user", "content": "上周的订单太慢了，急！"}
    assert '"order_no"' in request["messages"][0]["content"]


async def test_a_failing_llm_fills_no_params(llm):
    fake, url = llm
    fake.status = 503
    matcher = LlmMatcher(
        Settings(llm_url=url, llm_model="tiny-router", llm_timeout_s=ANSWER_TIMEOUT_S)
    )
    try:
        assert await matcher.fill_params("订单 888", ORDER_SCHEMA) == {}
    finally:
        await matcher.aclose()
    [request] = fake.received  # it was asked, once, about this text and this schema
    assert request["model"] == "tiny-router"
    assert request["messages"][-1] == {"role": "user", "content": "订单 888"}
    assert '"order_no"' in request["messages"][0]["content"]
