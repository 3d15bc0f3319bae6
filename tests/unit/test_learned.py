"""The learned-examples snapshot: what corrections and 421s change for a text."""

from __future__ import annotations

import numpy as np
import pytest

from agent_reach.model.feedback import LearnedExample
from agent_reach.routing.learned import LearnedSet
from agent_reach.routing.matchers import classifier


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


def test_not_mine_renormalizes_what_is_left_instead_of_raising_every_rest_to_one():
    """The failing case: refund.apply held nearly all of the classifier's probability and
    its agent answered 421; the others scored 0.0117, 0.0033 and 0.0029. Conditioned on
    "not refund" they must share the probability as before among themselves (not each
    become 1.0, margin 0, `ambiguous`), and the gate still scales them."""
    tags = ("refund.apply", "invoice.issue", "order.track", "product.query")
    probabilities = np.array([0.9821, 0.0117, 0.0033, 0.0029])
    model = one_text_model(tags, np.log(probabilities))
    before = model.scores(np.array([[1.0, 0.0]], dtype=np.float32), ["t"])[0]
    gate = before["refund.apply"] / 0.9821
    assert before["invoice.issue"] == pytest.approx(0.0117 * gate, abs=1e-5)
    after = model.scores(
        np.array([[1.0, 0.0]], dtype=np.float32), ["t"], [frozenset({"refund.apply"})]
    )[0]
    assert "refund.apply" not in after
    rest = 0.0117 + 0.0033 + 0.0029
    for tag, p in zip(tags[1:], probabilities[1:], strict=True):
        assert after[tag] == pytest.approx(p / rest * gate, abs=1e-5)
    assert after["invoice.issue"] - after["order.track"] > 0.4  # a clear margin, not 0


def one_text_model(tags: tuple[str, ...], logits: np.ndarray) -> classifier.Model:
    """A classifier whose logits are `logits` for any text (only the bias is set), every
    capability's one card text the same vector."""
    d = 2
    weights = np.zeros((d + classifier.NGRAM_BUCKETS + 1, len(tags)), dtype=np.float32)
    weights[-1] = logits
    return classifier.Model(
        capabilities=tags,
        weights=weights,
        ngrams=classifier.Ngrams.fit([]),
        examples=np.tile(np.array([[1.0, 0.0]], dtype=np.float32), (len(tags), 1)),
        example_ngrams=np.zeros((classifier.NGRAM_BUCKETS, len(tags)), dtype=np.float32),
        first_example=np.arange(len(tags)),
    )
