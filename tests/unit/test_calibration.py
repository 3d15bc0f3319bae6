"""Self-calibration from plain data: folds, the fitted map, and what thresholds should give."""

from __future__ import annotations

import numpy as np
import pytest

from agent_reach.routing.calibration import (
    TARGET_OOS_RECALL,
    TARGET_REFERENCE_RECALL,
    HeldOut,
    Trial,
    fit_calibration,
    folds_of,
    trial_of,
)
from agent_reach.routing.catalog import CapabilityCard

CATALOG = {
    f"cap.{n}": CapabilityCard(
        f"cap.{n}", (f"about {n}",), tuple(f"text {n} {i}" for i in range(4))
    )
    for n in range(7)
}


def test_every_example_is_held_out_once_in_scope_and_once_out_of_scope():
    folds = folds_of(CATALOG)
    assert len(folds) == 5
    in_scope = [(h.text, h.capability) for f in folds for h in f.held_out if h.capability]
    out_of_scope = [h.text for f in folds for h in f.held_out if h.capability is None]
    examples = [e for card in CATALOG.values() for e in card.examples]
    assert sorted(out_of_scope) == sorted(examples)
    assert len(in_scope) == len(set(in_scope))
    for fold in folds:
        held = {h.text for h in fold.held_out}
        kept = {e for card in fold.catalog.values() for e in card.examples}
        assert not held & kept, "a held-out text is never in the catalog it is scored on"
        assert all(card.descriptions for card in fold.catalog.values())
        gone = {h.text.split()[1] for h in fold.held_out if h.capability is None}
        assert not {f"cap.{n}" for n in gone} & set(fold.catalog)
    assert folds_of(CATALOG)[2].held_out == folds[2].held_out  # deterministic


def test_learned_examples_are_held_out_in_scope_but_never_as_out_of_scope_texts():
    catalog = {
        tag: CapabilityCard(
            tag, card.descriptions, (*card.examples, f"taught {tag}"), None, (f"taught {tag}",)
        )
        for tag, card in CATALOG.items()
    }
    folds = folds_of(catalog)
    out_of_scope = {h.text for f in folds for h in f.held_out if h.capability is None}
    in_scope = {(h.text, h.capability) for f in folds for h in f.held_out if h.capability}
    assert out_of_scope == {e for card in CATALOG.values() for e in card.examples}
    assert {(f"taught {tag}", tag) for tag in catalog} <= in_scope
    for fold in folds:  # a kept card still says which of its examples were learned
        for tag, card in fold.catalog.items():
            assert card.learned == ((f"taught {tag}",) if f"taught {tag}" in card.examples else ())


def test_the_map_is_monotone_and_half_where_it_refuses_the_target_share_out_of_scope():
    rng = np.random.default_rng(7)
    right = rng.uniform(0.5, 1.0, 200)  # in scope, the best capability is the right one
    outside = rng.uniform(0.0, 0.5, 50)  # out of scope: 4 times fewer
    trial = Trial(
        best=np.concatenate([right, outside]),
        second=np.zeros(250),
        is_right=np.concatenate([np.ones(200, bool), np.zeros(50, bool)]),
        in_scope=np.concatenate([np.ones(200, bool), np.zeros(50, bool)]),
        reference=np.zeros(250, bool),
    )
    calibration = fit_calibration(("lexical",), trial)
    assert calibration.fitted and calibration.slope > 1
    values = [calibration.confidence(x) for x in (0.05, 0.3, 0.5, 0.7, 0.95)]
    assert values == sorted(values)
    midpoint = float(np.quantile(outside, TARGET_OOS_RECALL))
    assert calibration.confidence(midpoint) == pytest.approx(0.5, abs=0.01)
    expected = calibration.expected(0.5, 0.0)
    assert expected is not None
    assert expected.out_of_scope_recall == pytest.approx(TARGET_OOS_RECALL, abs=0.03)
    assert expected.in_scope_accuracy == 1.0


def test_too_few_held_out_texts_leave_raw_scores_as_they_are():
    held = [HeldOut("a", "cap.1"), HeldOut("b", None)]
    calibration = fit_calibration(("lexical",), trial_of(held, [{"cap.1": 0.9}, {"cap.1": 0.2}]))
    assert not calibration.fitted
    assert calibration.confidence(0.37) == 0.37


def test_a_trial_records_the_two_best_and_whether_the_best_was_right():
    held = [HeldOut("a", "cap.1"), HeldOut("b", "cap.2"), HeldOut("c", None), HeldOut("d", None)]
    trial = trial_of(
        held, [{"cap.1": 0.9, "cap.2": 0.1}, {"cap.1": 0.6, "cap.2": 0.3}, {}, {"cap.1": 0.2}]
    )
    assert trial.best.tolist() == [0.9, 0.6, 0.0, 0.2]
    assert trial.second.tolist() == [0.1, 0.3, 0.0, 0.0]
    assert trial.is_right.tolist() == [True, False, False, False]
    assert trial.in_scope.tolist() == [True, True, False, False]


def test_small_raw_scores_still_fit_a_rising_map():
    # many capabilities, few examples: best raw scores around 0.02-0.2, where a full
    # Newton step from the prior overshot and the fit fell to the minimum slope
    rng = np.random.default_rng(5)
    best = 1 / (
        1 + np.exp(-np.concatenate([rng.normal(-2.5, 1.0, 300), rng.normal(-3.7, 0.9, 450)]))
    )
    in_scope = np.concatenate([np.ones(300, bool), np.zeros(450, bool)])
    trial = Trial(
        best=best,
        second=np.zeros(750),
        is_right=in_scope & (rng.uniform(size=750) < 0.74),
        in_scope=in_scope,
        reference=np.zeros(750, bool),
    )
    calibration = fit_calibration(("embedding",), trial)
    assert calibration.slope > 0.5
    expected = calibration.expected(0.5, 0.0)
    assert expected is not None
    assert expected.out_of_scope_recall == pytest.approx(TARGET_OOS_RECALL, abs=0.03)
    assert expected.in_scope_accuracy > 0.4


def test_a_catalog_without_in_scope_texts_is_centred_on_the_reference_set():
    """Description-only cards hold nothing out in scope: the reference texts alone centre
    the map (TARGET_REFERENCE_RECALL of them below 0.5), with the prior's slope."""
    rng = np.random.default_rng(7)
    reference = rng.uniform(0.0, 0.1, size=400)
    trial = Trial(
        best=reference,
        second=np.zeros(400),
        is_right=np.zeros(400, bool),
        in_scope=np.zeros(400, bool),
        reference=np.ones(400, bool),
    )
    calibration = fit_calibration(("embedding",), trial)
    assert calibration.fitted and calibration.slope == 1.0
    refused = np.mean([calibration.confidence(float(r)) < 0.5 for r in reference])
    assert refused == pytest.approx(TARGET_REFERENCE_RECALL, abs=0.01)
    assert calibration.confidence(0.5) > 0.9  # a text like a card's words is sure


def test_out_of_scope_texts_that_do_not_score_at_all_leave_the_map_unfitted():
    """The lexical matcher on texts sharing no word with any card scores them 0: centred
    there, the map would make any shared word certain (0.13 -> 0.999). Unfitted, the
    uncalibrated floor decides instead."""
    silent = np.zeros(400)
    silent[:60] = 0.02  # a few share a word: still under the 80 % quantile
    trial = Trial(
        best=silent,
        second=np.zeros(400),
        is_right=np.zeros(400, bool),
        in_scope=np.zeros(400, bool),
        reference=np.ones(400, bool),
    )
    calibration = fit_calibration(("lexical",), trial)
    assert not calibration.fitted
    assert calibration.confidence(0.13) == pytest.approx(0.13)


def test_the_higher_centre_of_siblings_and_reference_texts_wins():
    siblings = np.full(50, 0.4)
    reference = np.full(50, 0.05)
    trial = Trial(
        best=np.concatenate([np.full(50, 0.9), siblings, reference]),
        second=np.zeros(150),
        is_right=np.concatenate([np.ones(50, bool), np.zeros(100, bool)]),
        in_scope=np.concatenate([np.ones(50, bool), np.zeros(100, bool)]),
        reference=np.concatenate([np.zeros(100, bool), np.ones(50, bool)]),
    )
    calibration = fit_calibration(("embedding",), trial)
    assert calibration.confidence(0.39) < 0.5 < calibration.confidence(0.41)


def test_without_in_scope_texts_the_others_keep_their_share_of_the_best():
    """Description-only cards: the reference set centres the map on the best score, and
    two capabilities that split a text 0.66 / 0.33 stay apart by the margin instead of
    both being lifted to ~1 by a low midpoint."""
    reference = np.linspace(0.001, 0.02, 100)
    trial = Trial(
        best=reference,
        second=np.zeros(100),
        is_right=np.zeros(100, bool),
        in_scope=np.zeros(100, bool),
        reference=np.ones(100, bool),
    )
    calibration = fit_calibration(("embedding",), trial)
    assert calibration.relative and not calibration.sloped
    best, second = calibration.confidences([0.66, 0.33])
    assert calibration.confidence(0.33) > 0.95  # mapped alone: no margin left
    assert best == pytest.approx(calibration.confidence(0.66))
    assert second == pytest.approx(best / 2)
    expected = calibration.expected(0.5, 0.15)
    assert expected is not None
    assert expected.out_of_scope_recall == pytest.approx(TARGET_REFERENCE_RECALL, abs=0.01)


def test_with_siblings_held_out_the_slope_is_fitted_against_them_not_the_reference():
    """A catalog with its own out-of-scope side (held-out siblings) fits its slope as it
    did before the reference set; easy reference texts only raise the midpoint."""
    right = np.linspace(0.5, 0.95, 40)
    siblings = np.linspace(0.05, 0.6, 40)
    base = Trial(
        best=np.concatenate([right, siblings]),
        second=np.zeros(80),
        is_right=np.concatenate([np.ones(40, bool), np.zeros(40, bool)]),
        in_scope=np.concatenate([np.ones(40, bool), np.zeros(40, bool)]),
        reference=np.zeros(80, bool),
    )
    with_reference = Trial(
        best=np.concatenate([base.best, np.full(400, 0.001)]),
        second=np.zeros(480),
        is_right=np.concatenate([base.is_right, np.zeros(400, bool)]),
        in_scope=np.concatenate([base.in_scope, np.zeros(400, bool)]),
        reference=np.concatenate([base.reference, np.ones(400, bool)]),
    )
    before = fit_calibration(("embedding",), base)
    after = fit_calibration(("embedding",), with_reference)
    assert after.sloped and not after.relative
    assert after.slope == pytest.approx(before.slope)
    assert after.intercept == pytest.approx(before.intercept)
