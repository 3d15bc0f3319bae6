"""Large catalogs: the classifier fitted in blocks of texts, an incremental refit after a
registration, and calibration trials restricted from the fit in force."""

from __future__ import annotations

import numpy as np
import pytest

from agent_reach.routing.calibration import folds_of
from agent_reach.routing.catalog import CapabilityCard
from agent_reach.routing.matchers import classifier, embedding, logistic
from agent_reach.routing.matchers.calibrating import fit_and_try
from agent_reach.routing.matchers.protocol import normalize_text

TOOLS = {
    "weather_forecast": "Weather forecast: rain, temperature and wind for any city",
    "flight_search": "Search flights between two airports and compare ticket prices",
    "recipe_finder": "Find cooking recipes by ingredient, cuisine or diet",
    "stock_quotes": "Real-time stock quotes and company share prices",
    "translate_text": "Translate text between English, Chinese and other languages",
    "package_tracking": "Track a parcel or shipment by its tracking number",
}
NEW = CapabilityCard(
    "kiln_scheduler", ("Schedule firing times and temperatures for a pottery kiln",), ()
)


def docs_only(tools: dict[str, str]) -> dict[str, CapabilityCard]:
    return {tag: CapabilityCard(tag, (text,), ()) for tag, text in tools.items()}


def clusters(rng: np.random.Generator, classes: int, per_class: int) -> tuple[np.ndarray, ...]:
    centres = rng.normal(size=(classes, 16)).astype(np.float32)
    labels = np.repeat(np.arange(classes), per_class)
    x = centres[labels] + 0.3 * rng.normal(size=(len(labels), 16)).astype(np.float32)
    return x, labels


def test_the_fit_summed_block_by_block_is_the_fit_of_every_text_at_once(monkeypatch):
    x, labels = clusters(np.random.default_rng(1), 7, 5)
    whole = logistic.fit_logistic(x, labels, 7)
    monkeypatch.setattr(logistic, "CHUNK_ROWS", 4)  # 35 texts in 9 blocks
    blocks = logistic.fit_logistic(x, labels, 7)
    # the same sums in another order: Adam's steps amplify float32 rounding in the weights
    # of near-zero gradients, not in what the classifier says
    p_whole, p_blocks = (logistic._softmax(x @ w[:-1] + w[-1]) for w in (whole, blocks))
    np.testing.assert_allclose(p_blocks, p_whole, atol=2e-3)
    assert (p_blocks.argmax(axis=1) == labels).all()


def test_new_columns_are_fitted_against_the_kept_ones_which_stay_as_they_were():
    x, labels = clusters(np.random.default_rng(2), 6, 4)
    old = logistic.fit_logistic(x[labels < 5], labels[labels < 5], 5)
    start = np.hstack([old, np.zeros((old.shape[0], 1), dtype=np.float32)])
    weights = logistic.fit_new_columns(x, labels, start, np.array([5]))
    np.testing.assert_array_equal(weights[:, :5], old)
    predicted = np.argmax(x @ weights[:-1] + weights[-1], axis=1)
    assert (predicted[labels == 5] == 5).all()  # the new class takes its own texts
    assert (predicted[labels < 5] == labels[labels < 5]).mean() >= 0.95  # not the others'


@pytest.fixture
def large(monkeypatch: pytest.MonkeyPatch) -> None:
    """Six capabilities count as a large catalog here; one more is an incremental refit."""
    monkeypatch.setattr(classifier, "LARGE_CATALOG", 6)
    monkeypatch.setattr(classifier, "INCREMENTAL_SHARE", 0.2)


def spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    fit_logistic, fit_new_columns = logistic.fit_logistic, logistic.fit_new_columns

    def whole(*args, **kwargs):
        calls.append("whole")
        return fit_logistic(*args, **kwargs)

    def columns(*args, **kwargs):
        calls.append("columns")
        return fit_new_columns(*args, **kwargs)

    monkeypatch.setattr(logistic, "fit_logistic", whole)
    monkeypatch.setattr(logistic, "fit_new_columns", columns)
    return calls


async def test_one_registration_refits_only_the_new_capability(large, monkeypatch):
    matcher = embedding.EmbeddingMatcher()
    catalog = docs_only(TOOLS)
    matcher.fit(catalog)
    before = {t: await matcher.scores(normalize_text(TOOLS[t])) for t in TOOLS}
    calls = spy(monkeypatch)

    matcher.fit({**catalog, NEW.capability: NEW})

    assert calls == ["columns"]
    scores = await matcher.scores(normalize_text("when should I fire my pottery kiln"))
    assert max(scores, key=scores.__getitem__) == NEW.capability
    for tag, text in TOOLS.items():  # every other tool still first for its own words
        after = await matcher.scores(normalize_text(text))
        assert max(after, key=after.__getitem__) == tag
        assert max(before[tag], key=before[tag].__getitem__) == tag


async def test_changes_beyond_the_incremental_share_get_a_full_fit(large, monkeypatch):
    matcher = embedding.EmbeddingMatcher()
    catalog = docs_only(TOOLS)
    matcher.fit(catalog)
    calls = spy(monkeypatch)
    grown = {**catalog, NEW.capability: NEW}
    matcher.fit(grown)  # 1 of 7 changed: within 0.2
    other = CapabilityCard("hotel_booking", ("Book hotel rooms and compare nightly rates",), ())
    matcher.fit({**grown, "hotel_booking": other})  # 2 of 8 since the full fit: beyond it
    assert calls == ["columns", "whole"]
    matcher.fit(grown)  # a removal: the kept capabilities' weights, nothing fitted
    assert calls == ["columns", "whole"]
    scores = await matcher.scores(normalize_text("book me a hotel room"))
    assert "hotel_booking" not in scores


def test_a_learned_example_refits_from_scratch(large, monkeypatch):
    """Corrections were measured on fits from scratch: a card they changed is not refitted
    alone."""
    matcher = embedding.EmbeddingMatcher()
    catalog = docs_only(TOOLS)
    matcher.fit(catalog)
    calls = spy(monkeypatch)
    card = catalog["package_tracking"]
    learned = ("where is my stuff",)
    taught = CapabilityCard(card.capability, card.descriptions, learned, learned=learned)
    matcher.fit({**catalog, "package_tracking": taught})
    assert calls == ["whole"]


def test_trials_of_a_large_description_only_catalog_restrict_the_fit_in_force(large, monkeypatch):
    matcher = embedding.EmbeddingMatcher()
    catalog = docs_only(TOOLS)
    folds = folds_of(catalog, reference=("tell me a joke", "hello there", "what time is it"))
    calls = spy(monkeypatch)
    trials = fit_and_try(matcher, catalog, folds)
    assert calls == ["whole"]  # the fit in force, no fit per fold
    assert trials is not None and len(trials) == len(folds)
    fold = folds[0]
    model = matcher.trial(fold.catalog).model
    assert model is not None and set(model.capabilities) == set(fold.catalog)
    full = matcher._model
    assert full is not None
    column = full.capabilities.index(model.capabilities[0])
    np.testing.assert_array_equal(model.weights[:, 0], full.weights[:, column])


def test_a_catalog_with_examples_is_calibrated_on_trials_fitted_without_them(large, monkeypatch):
    """Its held-out examples were texts the fit in force learned: no restriction of it."""
    matcher = embedding.EmbeddingMatcher()
    catalog = docs_only(TOOLS)
    card = catalog["package_tracking"]
    catalog["package_tracking"] = CapabilityCard(
        card.capability, card.descriptions, ("where is my parcel",)
    )
    calls = spy(monkeypatch)
    fit_and_try(matcher, catalog, folds_of(catalog))
    assert calls == ["whole"] * (1 + len(folds_of(catalog)))
