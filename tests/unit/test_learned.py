"""The learned-examples snapshot: what corrections and 421s change for a text."""

from __future__ import annotations

from agent_reach.model.feedback import LearnedExample
from agent_reach.routing.learned import LearnedSet, given_not
from agent_reach.routing.router import CapabilityMatch


def example(
    n: int,
    capability: str,
    text: str,
    kind: str = "positive",
    *,
    at: float = 0.0,
    expires: float = 100.0,
) -> LearnedExample:
    return LearnedExample(
        id=f"e{n}",
        capability=capability,
        text=text,
        kind=kind,  # type: ignore[arg-type]
        source="feedback" if kind == "positive" else "misdirected",
        request_id=f"r{n}",
        principal="alice",
        learned_at=at,
        expires_at=expires,
    )


def test_the_newest_correction_of_a_text_wins_and_expired_ones_are_gone():
    learned = LearnedSet.of(
        [
            example(1, "order.query", "我的包裹 ", at=1.0),
            example(2, "parcel.track", "我的包裹", at=2.0),
            example(3, "faq.answer", "怎么开发票", expires=10.0),
            example(4, "order.query", "我的包裹", "negative", at=3.0),
        ],
        version=7,
        now=50.0,
    )
    assert learned.positive["我的包裹"].capability == "parcel.track"
    assert "怎么开发票" not in learned.positive
    assert learned.negative == {"我的包裹": frozenset({"order.query"})}
    assert learned.by_capability == {"parcel.track": ("我的包裹",)}
    assert learned.version == 7


def test_only_positive_examples_change_what_the_matchers_are_fitted_on():
    one = LearnedSet.of([example(1, "order.query", "a")], version=1, now=0.0)
    more = LearnedSet.of(
        [example(1, "order.query", "a"), example(2, "order.query", "b", "negative")],
        version=2,
        now=0.0,
    )
    assert one.examples_version == more.examples_version != LearnedSet().examples_version


def test_given_not_drops_the_refused_and_renormalizes_the_rest():
    matches = [
        CapabilityMatch("order.query", 0.6, {}),
        CapabilityMatch("parcel.track", 0.3, {}),
        CapabilityMatch("faq.answer", 0.1, {}),
    ]
    rest = given_not(matches, frozenset({"order.query"}))
    assert [(m.capability, m.confidence) for m in rest] == [
        ("parcel.track", 0.75),
        ("faq.answer", 0.25),
    ]
