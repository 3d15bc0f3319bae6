"""Text matchers and the matching pipeline, on plain data and the manual clock."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent_reach.backends.protocols import InstanceRecord
from agent_reach.clock import ManualClock
from agent_reach.config import Settings, load_mapping
from agent_reach.errors import InvalidRequest
from agent_reach.model.agents import AgentSpec
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.catalog import CapabilityCard, build_catalog
from agent_reach.routing.matchers import blending as blending_module
from agent_reach.routing.matchers import calibrating as calibrating_module
from agent_reach.routing.matchers import refitting as refitting_module
from agent_reach.routing.matchers.blending import blend, strongest
from agent_reach.routing.matchers.lexical import LexicalMatcher
from agent_reach.routing.matchers.pipeline import MatchingPipeline
from agent_reach.routing.matchers.protocol import normalize_text

SHOP = {
    "logistics.track": {
        "description": "物流查询：快递到哪了、包裹什么时候到、配送进度",
        "examples": ["我的快递到哪了", "包裹怎么还没送到", "东西怎么还没到", "查一下物流"],
    },
    "order.manage": {
        "description": "订单管理：查订单、取消订单、修改收货地址",
        "examples": ["我想取消订单", "帮我查一下订单状态", "修改订单地址"],
    },
    "faq.answer": {
        "description": "常见问题：退换货政策、发票、会员积分",
        "examples": ["怎么开发票", "退货政策是什么", "积分怎么用"],
    },
    "travel.book_flight": {
        "description": "Book flights and change airline reservations",
        "examples": ["book me a flight to paris", "I need a plane ticket to tokyo"],
    },
    "weather.forecast": {
        "description": "Weather forecast for a city",
        "examples": ["will it rain tomorrow", "what is the weather like in berlin"],
    },
}


def add(index: RegistryIndex, agent_id: str, capability: str, **card: object) -> None:
    spec = AgentSpec(
        id=agent_id,
        capabilities=[capability],
        transport={"endpoint": f"http://127.0.0.1:1/{agent_id}"},
        **card,
    )
    index.upsert(InstanceRecord(spec, 0.0), 1e9)


def shop_index() -> RegistryIndex:
    index = RegistryIndex()
    for capability, card in SHOP.items():
        add(index, capability.replace(".", "-"), capability, **card)
    return index


async def lexical_scores(text: str) -> dict[str, float]:
    matcher = LexicalMatcher()
    matcher.fit(build_catalog(shop_index()))
    return await matcher.scores(normalize_text(text))


def best(scores: dict[str, float]) -> str:
    return max(scores, key=scores.__getitem__)


@pytest.mark.parametrize(
    ("text", "capability"),
    [
        ("我买的东西怎么还没到", "logistics.track"),
        ("帮我把这个订单取消了", "order.manage"),
        ("发票怎么开", "faq.answer"),
        ("Can you book a flight to London?", "travel.book_flight"),
        ("weather forecast for tomorrow", "weather.forecast"),
    ],
)
async def test_lexical_matches_chinese_and_english_text_to_the_right_capability(text, capability):
    scores = await lexical_scores(text)
    assert best(scores) == capability
    assert scores[capability] >= 0.5


async def test_lexical_matches_on_tag_words_when_a_card_has_no_text():
    matcher = LexicalMatcher()
    matcher.fit({"invoice.download": CapabilityCard("invoice.download", (), ())})
    assert best(await matcher.scores("download my invoice")) == "invoice.download"


@pytest.mark.parametrize("text", ["今天股市行情如何", "play some jazz music", "asdf qwerty"])
async def test_lexical_scores_unrelated_text_low(text):
    scores = await lexical_scores(text)
    assert max(scores.values(), default=0.0) < 0.2


async def test_lexical_confidence_does_not_shrink_as_the_catalog_grows():
    index = shop_index()
    for n in range(200):
        add(index, f"filler-{n}", f"filler.task{n}", examples=[f"filler words number {n}"])
    matcher = LexicalMatcher()
    matcher.fit(build_catalog(index))
    scores = await matcher.scores(normalize_text("我买的东西怎么还没到"))
    assert scores["logistics.track"] >= 0.5


@dataclass
class Scripted:
    """A matcher whose answers the test writes; it counts fits and calls."""

    name: str
    answers: dict[str, dict[str, float]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    catalogs: list[set[str]] = field(default_factory=list)

    def fit(self, catalog: Mapping[str, CapabilityCard], background: Sequence[str] = ()) -> None:
        self.catalogs.append(set(catalog))

    def trial(self, catalog: Mapping[str, CapabilityCard], background: Sequence[str] = ()) -> None:
        return None  # answers as written: not calibrated

    async def scores(self, text: str, without: frozenset[str] = frozenset()) -> dict[str, float]:
        self.calls.append(text)
        return self.answers.get(text, {})


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> tuple[Scripted, Scripted]:
    cheap = Scripted("cheap", {"sure": {"a": 0.95, "b": 0.05}, "unsure": {"a": 0.4, "b": 0.3}})
    strong = Scripted("strong", {"unsure": {"b": 0.9, "a": 0.1}})
    monkeypatch.setitem(refitting_module.MATCHERS, "cheap", lambda settings: cheap)
    monkeypatch.setitem(refitting_module.MATCHERS, "strong", lambda settings: strong)
    monkeypatch.setitem(blending_module.BLEND_WEIGHTS, "cheap", 1.0)
    monkeypatch.setitem(blending_module.BLEND_WEIGHTS, "strong", 3.0)
    return cheap, strong


POLICY = Policy(matchers=["cheap", "strong"], confident_at={"cheap": 0.9})


def pipeline_over(index: RegistryIndex, clock: ManualClock | None = None) -> MatchingPipeline:
    return MatchingPipeline(index, clock or ManualClock(), Settings())


async def test_pipeline_stops_at_a_confident_matcher_and_asks_the_next_only_when_unsure(
    scripted,
):
    cheap, strong = scripted
    pipeline = pipeline_over(shop_index())
    await pipeline.ready(POLICY)
    sure = (await pipeline.match("Sure", POLICY)).matches
    assert [m.capability for m in sure] == ["a", "b"]
    assert sure[0].confidence == 0.95
    assert sure[0].scores == {"cheap": 0.95}
    assert strong.calls == []
    unsure = (await pipeline.match("unsure", POLICY)).matches
    assert strong.calls == ["unsure"]
    assert cheap.calls == ["sure", "unsure"]
    # blended: (1 x 0.3 + 3 x 0.9) / 4 for b, (1 x 0.4 + 3 x 0.1) / 4 for a
    assert [(m.capability, m.confidence) for m in unsure] == [("b", 0.75), ("a", 0.175)]
    assert unsure[0].scores == {"cheap": 0.3, "strong": 0.9}


async def test_a_matcher_with_no_opinion_does_not_dilute_the_blend():
    matches = blend({"lexical": {"a": 0.8}, "llm": {}})
    assert [(m.capability, m.confidence) for m in matches] == [("a", 0.8)]
    assert matches[0].scores == {"lexical": 0.8, "llm": 0.0}
    assert blend({"lexical": {}}) == []


async def test_the_lexical_score_counts_only_while_it_is_the_only_opinion():
    # the embedding classifier holds the lexical n-grams itself: lexical weighs 0 beside it
    matches = blend({"lexical": {"a": 0.9}, "embedding": {"b": 0.6, "a": 0.2}})
    assert [(m.capability, m.confidence) for m in matches] == [("b", 0.6), ("a", 0.2)]
    assert matches[1].scores == {"lexical": 0.9, "embedding": 0.2}
    alone = blend({"lexical": {"a": 0.9}, "embedding": {}})  # the encoder still loading
    assert [(m.capability, m.confidence) for m in alone] == [("a", 0.9)]


async def test_an_uncalibrated_catalog_keeps_the_strongest_matchers_score():
    # lexical is sure (the text is nearly the card's words), the encoder less so: the
    # blend's mean would put it under any sensible threshold
    asked = {"lexical": {"track": 0.99, "stock": 0.0}, "embedding": {"track": 0.43, "stock": 0.07}}
    matches = strongest(asked)
    assert [(m.capability, m.confidence) for m in matches] == [("track", 0.99), ("stock", 0.07)]
    assert matches[0].scores == {"lexical": 0.99, "embedding": 0.43}
    assert blend(asked)[0].confidence < 0.5


async def test_cache_answers_repeated_text_until_ttl_and_forgets_on_catalog_change(scripted):
    cheap, _ = scripted
    clock = ManualClock()
    index = shop_index()
    pipeline = pipeline_over(index, clock)
    await pipeline.ready(POLICY)
    first = await pipeline.match("sure", POLICY)
    assert await pipeline.match("  SURE ", POLICY) == first  # normalized to the same key
    assert cheap.calls == ["sure"]
    clock.advance(POLICY.match_cache_s + 1)
    await pipeline.match("sure", POLICY)
    assert cheap.calls == ["sure", "sure"]
    add(index, "new-agent", "new.capability", description="something new")
    await pipeline.match("sure", POLICY)
    assert cheap.calls == ["sure", "sure", "sure"]
    assert "new.capability" in cheap.catalogs[-1]


async def test_cache_is_forgotten_when_the_policy_changes(scripted):
    cheap, _ = scripted
    pipeline = pipeline_over(shop_index())
    await pipeline.match("sure", POLICY)
    await pipeline.match("sure", Policy(**{**POLICY.model_dump(), "margin": 0.2}))
    assert cheap.calls == ["sure", "sure"]


async def test_refit_after_a_registration_changes_the_match():
    index = shop_index()
    pipeline = pipeline_over(index)
    policy = Policy(matchers=["lexical"], match_cache_s=0)
    before = (await pipeline.match("退款什么时候到账", policy)).matches
    assert all(m.capability != "refund.status" for m in before)
    add(
        index,
        "refund-agent",
        "refund.status",
        description="退款进度查询",
        examples=["退款什么时候到账", "钱退了吗"],
    )
    after = (await pipeline.match("退款什么时候到账", policy)).matches
    assert after[0].capability == "refund.status"
    assert after[0].scores["lexical"] == after[0].scores["raw"]


async def test_unknown_matcher_and_llm_without_url_are_reported_and_the_rest_still_match():
    pipeline = pipeline_over(shop_index())
    policy = Policy(matchers=["lexical", "nonesuch", "llm"], match_cache_s=0)
    await pipeline.ready(policy)
    matched = await pipeline.match("我的快递到哪了", policy)
    assert matched.matches[0].capability == "logistics.track"
    assert matched.text.matchers == ["lexical"]
    failed = pipeline.status(policy)["failed"]
    assert "unknown matcher" in failed["nonesuch"]
    assert "AR_LLM_URL" in failed["llm"]
    with pytest.raises(InvalidRequest, match="unknown matcher"):
        await pipeline.matcher("nonesuch")


def test_text_is_normalized_nfkc_lower_and_single_spaced():
    assert normalize_text("  ＷＨＥＲＥ\tis  My\n包裹 ") == "where is my 包裹"


@pytest.mark.parametrize("name", ["lexical-only"])
def test_the_benchmark_policies_are_valid_routing_policies(name):
    path = Path(__file__).parents[2] / "bench" / "policies" / f"{name}.toml"
    policy = Policy(**load_mapping(path))
    assert policy.matchers


class Blocked(Scripted):
    """A matcher whose fit waits for the test (a sentence encoder still loading)."""

    def __init__(self) -> None:
        super().__init__("slow", {"我的快递到哪了": {"logistics.track": 0.9}})
        self.release = threading.Event()

    def fit(self, catalog: Mapping[str, CapabilityCard], background: Sequence[str] = ()) -> None:
        assert self.release.wait(10), "the test never released the fit"
        super().fit(catalog, background)


async def test_text_is_matched_lexically_while_a_slow_matcher_fits_and_says_so(monkeypatch):
    slow = Blocked()
    monkeypatch.setitem(refitting_module.MATCHERS, "slow", lambda settings: slow)
    policy = Policy(matchers=["lexical", "slow"], match_cache_s=0)
    pipeline = pipeline_over(shop_index())
    try:
        early = await asyncio.wait_for(pipeline.match("我的快递到哪了", policy), 5)
        assert early.matches[0].capability == "logistics.track"
        assert (early.text.matchers, early.text.pending) == (["lexical"], ["slow"])
        assert pipeline.status(policy)["pending"] == ["slow"]
        assert slow.calls == []
        slow.release.set()
        await asyncio.wait_for(pipeline.ready(policy), 10)
        late = await pipeline.match("我的快递到哪了", policy)
        assert (late.text.matchers, late.text.pending) == (["lexical", "slow"], [])
        assert slow.calls == ["我的快递到哪了"]
    finally:
        slow.release.set()
        await pipeline.aclose()


async def test_a_model_matcher_is_loaded_only_once_a_capability_has_text(monkeypatch):
    loaded: list[str] = []

    def factory(settings: Settings) -> Scripted:
        loaded.append("slow")
        return Scripted("slow")

    monkeypatch.setitem(refitting_module.MATCHERS, "slow", factory)
    monkeypatch.setattr(refitting_module, "LOADS_A_MODEL", frozenset({"slow"}))
    policy = Policy(matchers=["lexical", "slow"], match_cache_s=0)
    index = RegistryIndex()
    add(index, "bare-1", "inventory.check")  # a tag and nothing else
    pipeline = pipeline_over(index)
    try:
        await asyncio.wait_for(pipeline.ready(policy), 5)
        assert loaded == []
        assert pipeline.status(policy)["waiting_for_text"] == ["slow"]
        add(index, "faq-1", "faq.answer", examples=["怎么开发票"])
        await asyncio.wait_for(pipeline.ready(policy), 5)
        assert loaded == ["slow"]
        assert pipeline.status(policy)["ready"] == ["lexical", "slow"]
    finally:
        await pipeline.aclose()


async def test_an_instance_that_moves_or_joins_with_a_known_card_refits_nothing(monkeypatch):
    """Only the cards are the catalog: a new endpoint, or another instance of the same
    card, leaves every fit current, even while a slow matcher is still fitting."""
    slow = Blocked()
    monkeypatch.setitem(refitting_module.MATCHERS, "slow", lambda settings: slow)
    policy = Policy(matchers=["lexical", "slow"], match_cache_s=0)
    index = RegistryIndex()
    add(index, "track-1", "logistics.track", **SHOP["logistics.track"])
    pipeline = pipeline_over(index)
    try:
        early = await asyncio.wait_for(pipeline.match("我的快递到哪了", policy), 5)
        assert early.text.matchers == ["lexical"]
        version = pipeline.status(policy)["catalog_version"]
        moved = AgentSpec(
            id="track-1",
            capabilities=["logistics.track"],
            transport={"endpoint": "http://127.0.0.1:2/moved"},
            **SHOP["logistics.track"],
        )
        index.upsert(InstanceRecord(moved, 0.0), 1e9)  # a spec change: the index moves on
        add(index, "track-2", "logistics.track", **SHOP["logistics.track"])

        # the slow matcher still holds the fit job: a refit of the lexical matcher would
        # wait behind it, and its old fit of a one-card catalog would not be used
        moved_on = await asyncio.wait_for(pipeline.match("我的快递到哪了", policy), 5)
        assert moved_on.matches[0].capability == "logistics.track"
        assert moved_on.text.matchers == ["lexical"]
        assert pipeline.status(policy)["catalog_version"] == version
        slow.release.set()
        await asyncio.wait_for(pipeline.ready(policy), 10)
        assert slow.catalogs == [{"logistics.track"}]  # fitted once
        add(index, "faq-1", "faq.answer", **SHOP["faq.answer"])  # a new card: a new catalog
        assert pipeline.status(policy)["catalog_version"] != version
    finally:
        slow.release.set()
        await pipeline.aclose()


async def test_a_text_right_after_the_first_registration_waits_for_its_fit(monkeypatch):
    """The fit of an empty catalog cannot serve: a text sent while the first card's fit
    is still running (slower than `REFIT_WAIT_S` here) is answered once it lands."""
    fit_and_try = refitting_module.fit_and_try

    def slow(matcher, catalog, folds):
        if catalog:
            time.sleep(refitting_module.REFIT_WAIT_S + 0.5)  # in the worker thread
        return fit_and_try(matcher, catalog, folds)

    monkeypatch.setattr(refitting_module, "fit_and_try", slow)
    policy = Policy(matchers=["lexical"], match_cache_s=0)
    index = RegistryIndex()
    pipeline = pipeline_over(index)
    try:
        await asyncio.wait_for(pipeline.ready(policy), 5)  # fitted on no card at all
        add(index, "track-1", "logistics.track", **SHOP["logistics.track"])

        matched = await asyncio.wait_for(pipeline.match("我的快递到哪了", policy), 10)

        assert matched.matches[0].capability == "logistics.track"
        assert (matched.text.matchers, matched.text.pending) == (["lexical"], [])
    finally:
        await pipeline.aclose()


async def test_a_text_sent_while_the_new_fit_is_calibrated_waits_for_the_calibration(monkeypatch):
    """A fit is not current before its calibration is: a text sent between the two is
    answered by the new fit once calibrated, not refused for want of a usable matcher."""
    fit_calibration = calibrating_module.fit_calibration
    calibrating, release = threading.Event(), threading.Event()

    def slow(names, trials):
        calibrating.set()
        assert release.wait(10), "the test never let the calibration finish"  # worker thread
        return fit_calibration(names, trials)

    monkeypatch.setattr(calibrating_module, "fit_calibration", slow)
    policy = Policy(matchers=["lexical"], match_cache_s=0)
    index = RegistryIndex()
    pipeline = pipeline_over(index)
    try:
        await asyncio.wait_for(pipeline.ready(policy), 5)  # no card: nothing to calibrate
        add(index, "track-1", "logistics.track", **SHOP["logistics.track"])
        pipeline.prepare(policy)
        assert await asyncio.to_thread(calibrating.wait, 5)

        matching = asyncio.ensure_future(pipeline.match("我的快递到哪了", policy))
        for _ in range(10):  # the text is in, the calibration held: it waits for it
            await asyncio.sleep(0)
        assert not matching.done()
        release.set()
        matched = await asyncio.wait_for(matching, 10)

        assert matched.matches[0].capability == "logistics.track"
        assert (matched.text.matchers, matched.text.pending) == (["lexical"], [])
    finally:
        await pipeline.aclose()


def test_a_card_known_only_by_its_docs_learns_from_its_name_and_input_schema():
    from agent_reach.routing.matchers.protocol import card_texts, name_words

    assert name_words("get_weather") == "get weather"
    assert name_words("weather.get") == "weather get"
    assert name_words("getWeather") == "get Weather"
    assert name_words("HTTPServer") == "HTTP Server"
    assert name_words("mp3") == "mp3"
    schema = {
        "type": "object",
        "properties": {
            "trackingNo": {"type": "string", "description": "the parcel's tracking number"},
            "carrier": {"enum": ["SF", "EMS", "YTO"]},
            "items": {"type": "array", "items": {"properties": {"sku_id": {}}}},
        },
    }
    card = CapabilityCard("parcel.track", ("Track a parcel",), (), schema)
    assert card_texts(card) == (
        "parcel track",
        "track a parcel",
        "tracking no: the parcel's tracking number",
        "carrier",
        "sf ems yto",
        "items",
        "sku id",
    )
    unreadable = CapabilityCard("parcel.track", ("Track a parcel",), (), {"properties": 5})
    assert card_texts(unreadable) == ("parcel track", "track a parcel")
