"""Small catalogs: does off-topic text reach a business agent?

Catalogs of 1, 2 and 5 capabilities (a customer-service desk, in Chinese, one example
each: too few cards to hold examples out; the packaged reference set calibrates them),
and the same desk known by its docs alone (descriptions, no examples, as federated tools
are), each asked off-topic texts (weather, greetings,
nonsense, other languages, chit-chat) and in-scope paraphrases (none is a card's own
words), first as registered, then after one confirmed example (feedback) for the first
capability (the tour's text, which it served). Prints, per catalog and state, how many
off-topic texts a business agent got (the goal: none) and how many in-scope texts went to
their own capability.

    python bench/small_catalogs.py [--json FILE]

Routing runs as the coordinator runs it (the matching pipeline with the default policy's
matchers, then the router), with a live generic agent to take what is refused.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from agent_reach.backends.protocols import InstanceRecord
from agent_reach.clock import ManualClock
from agent_reach.config import Settings
from agent_reach.model.agents import AgentSpec
from agent_reach.model.feedback import LearnedExample
from agent_reach.policy.policy import Policy
from agent_reach.registry.index import RegistryIndex
from agent_reach.routing.learned import LearnedSet
from agent_reach.routing.matchers.pipeline import MatchingPipeline
from agent_reach.routing.router import decide

# capability -> (description, one example); the first N make the catalog of size N
DESK = {
    "order.track": ("物流查询、快递到哪了、买的东西怎么还没到", "我的快递到哪了"),
    "order.cancel": ("取消订单、不想要了、把这单撤销", "帮我把订单取消了"),
    "product.query": ("商品咨询、价格、规格参数、商品详情", "这款手机多少钱"),
    "inventory.check": ("库存查询、有没有货、还有货吗", "这款手机有蓝色256G吗"),
    "refund.apply": ("申请退款、退货退钱", "我要退款"),
}
SIZES = (1, 2, 5)
# Paraphrases: none is a card's own words.
IN_SCOPE = {
    "order.track": ["我的包裹到哪里了", "快递怎么还没到", "帮我查一下物流"],
    "order.cancel": ["这单我不想要了", "取消我的订单"],
    "product.query": ["这个手机价格是多少", "介绍一下这款商品的规格"],
    "inventory.check": ["蓝色的还有货吗", "这个有库存吗"],
    "refund.apply": ["我想退钱", "怎么申请退款"],
}
OFF_TOPIC = [
    "今天天气怎么样",  # weather
    "明天会下雨吗",
    "what's the weather like tomorrow",
    "你好",  # greetings
    "早上好呀",
    "hello there",
    "谢谢你",
    "asdfgh qwerty",  # nonsense
    "啊啊啊啊啊",
    "12345",
    "今日はいい天気ですね",  # other languages
    "bonjour, comment ça va ?",
    "wie spät ist es",
    "怎么办",  # chit-chat
    "给我讲个笑话",
    "你是谁",
    "我想听周杰伦的歌",
]
# confirmed for the first capability by feedback: the tour's own text, routed right
LEARNED_TEXT = "我买的东西怎么还没到"
GENERIC = "human.handoff"


@dataclass(slots=True)
class Outcome:
    """One catalog in one state: where each text went."""

    size: int
    learned: bool
    docs_only: bool = False
    off_topic_to_business: list[tuple[str, str]] = field(default_factory=list)
    in_scope_right: int = 0
    in_scope_total: int = 0
    in_scope_wrong: list[tuple[str, str | None]] = field(default_factory=list)


def catalog_index(size: int, docs_only: bool = False) -> RegistryIndex:
    """The first `size` capabilities of the desk, one agent each (`docs_only`: with their
    descriptions alone), and a generic agent."""
    index = RegistryIndex()
    for tag, (description, example) in list(DESK.items())[:size]:
        spec = AgentSpec(
            id=tag.replace(".", "-"),
            capabilities=[tag],
            description=description,
            examples=[] if docs_only else [example],
            transport={"endpoint": "http://127.0.0.1:9/invoke"},
        )
        index.upsert(InstanceRecord(spec, 0.0), float("inf")).health = "healthy"
    generic = AgentSpec(
        id="handoff",
        capabilities=[GENERIC],
        generic=True,
        transport={"endpoint": "http://127.0.0.1:9/invoke"},
    )
    index.upsert(InstanceRecord(generic, 0.0), float("inf")).health = "healthy"
    return index


def learned_set(capability: str) -> LearnedSet:
    example = LearnedExample(
        id="l-1",
        capability=capability,
        text=LEARNED_TEXT,
        kind="positive",
        source="feedback",
        request_id="r-1",
        principal="reviewer",
        learned_at=0.0,
        expires_at=float("inf"),
    )
    return LearnedSet.of([example], version=1, now=0.0)


async def route(pipeline: MatchingPipeline, index: RegistryIndex, text: str) -> str | None:
    """The capability the text goes to (the generic agent's tag when refused), or None."""
    policy = Policy()
    matched = await pipeline.match(text, policy)
    decision = decide(matched.matches, index, policy, now=0.0, from_text=True, text=matched.text)
    return decision.capability


async def evaluate(
    size: int, settings: Settings | None = None, docs_only: bool = False
) -> list[Outcome]:
    """Route every off-topic and in-scope text on a catalog of `size` capabilities once
    its matchers are fitted: as registered, then with a confirmed example learned."""
    index = catalog_index(size, docs_only)
    tags = list(DESK)[:size]
    snapshot = LearnedSet()
    pipeline = MatchingPipeline(index, ManualClock(), settings or Settings(), lambda: snapshot)
    outcomes = []
    try:
        for learned in (False, True):
            if learned:
                snapshot = learned_set(tags[0])
            await pipeline.ready(Policy())  # as a caller meets it a moment later
            outcome = Outcome(size, learned, docs_only)
            for text in OFF_TOPIC:
                went = await route(pipeline, index, text)
                if went is not None and went != GENERIC:
                    outcome.off_topic_to_business.append((text, went))
            for tag in tags:
                for text in IN_SCOPE[tag]:
                    went = await route(pipeline, index, text)
                    outcome.in_scope_total += 1
                    if went == tag:
                        outcome.in_scope_right += 1
                    else:
                        outcome.in_scope_wrong.append((text, went))
            outcomes.append(outcome)
        return outcomes
    finally:
        await pipeline.aclose()


async def evaluate_all() -> list[Outcome]:
    return [o for docs in (False, True) for size in SIZES for o in await evaluate(size, None, docs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="also write the outcomes here")
    args = parser.parse_args()
    outcomes = asyncio.run(evaluate_all())
    header = ("cards", "capabilities", "state", "off-topic to an agent", "in scope right")
    print(f"{header[0]:<13} {header[1]:>12}  {header[2]:<19} {header[3]:>21}  {header[4]:>14}")
    for o in outcomes:
        cards = "docs only" if o.docs_only else "one example"
        state = "one learned example" if o.learned else "as registered"
        off = f"{len(o.off_topic_to_business)} / {len(OFF_TOPIC)}"
        right = f"{o.in_scope_right} / {o.in_scope_total}"
        print(f"{cards:<13} {o.size:>12}  {state:<19} {off:>21}  {right:>14}")
        for text, went in o.off_topic_to_business:
            print(f"{'':>14}off-topic {text!r} -> {went}")
    if args.json:
        rows = [dataclasses.asdict(o) for o in outcomes]
        args.json.write_text(json.dumps(rows, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
