"""The fit of the embedding matcher's classifier (`classifier.py`): multinomial logistic
regression with L2, by full-batch Adam, fitted whole, or only for some classes against
the others' weights kept as they are (capabilities added to a large catalog).

The gradient is summed over blocks of CHUNK_ROWS texts, so memory grows with the classes
times the block, not with the classes times every card text: 5,000 description-only
tools (10,000 card texts) took 1.2 GB with one block of every text.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# L2 strength as scikit-learn's LogisticRegression(C=100) and 100 full-batch Adam steps.
# C=3 (scikit-learn's usual range) left 3-example catalogs so flat (best probability 0.12
# on CLINC150) that the margin rule refused most texts; of C = 3, 10, 30, 100 and 300, 100
# met the most goals on the validation splits (CLINC150 val, SMP2017 develop; k = 3, 10,
# 30), never on a test split.
INVERSE_L2 = 100.0
STEPS = 100
# STEPS from zero also regularize (a fit stopped early): the fit in force is always cold.
# A calibration trial of the same capabilities as an earlier one (a learned example, a
# re-registration) starts from that trial's weights and takes WARM_STEPS. Warm-starting
# the fit in force too made it sharper than the fit the constants were chosen for, and it
# learned less from corrections: CLINC150 val, k=3, the benchmark's corrections protocol
# run on the matcher directly, +3.1 points of in-scope accuracy after 141 corrections
# warm against +4.7 cold (+4.1 against +6.6 after 367); warm trials cost nothing (+4.6)
# and take 30 Adam steps instead of 100. Through the API (bench/routing.py --split dev,
# 600 texts routed) with the calibration's handling of learned examples: +1.9 before
# both changes, +4.7 after.
WARM_STEPS = 30
LEARNING_RATE = 0.1
BETAS = (0.9, 0.999)  # Adam's published defaults
CHUNK_ROWS = 2048  # texts per block of the gradient: 2048 x 5,000 classes is 40 MB


def fit_logistic(
    x: np.ndarray, labels: np.ndarray, n_classes: int, start: np.ndarray | None = None
) -> np.ndarray:
    """Weights (d + 1, C) of every class, the last row the bias. From `start` (an earlier
    fit of the same classes) it takes WARM_STEPS, not STEPS."""
    d = x.shape[1]
    if start is not None and start.shape == (d + 1, n_classes):
        weights, steps = start.copy(), WARM_STEPS
    else:
        weights, steps = np.zeros((d + 1, n_classes), dtype=np.float32), STEPS

    def gradient(w: np.ndarray) -> np.ndarray:
        out = np.zeros_like(w)
        for start_row in range(0, len(x), CHUNK_ROWS):
            rows = x[start_row : start_row + CHUNK_ROWS]
            p = _softmax(rows @ w[:-1] + w[-1])
            p[np.arange(len(p)), labels[start_row : start_row + CHUNK_ROWS]] -= 1.0
            out[:-1] += rows.T @ p
            out[-1] += p.sum(axis=0)
        return out

    return _adam(weights, steps, gradient, len(x))


def fit_new_columns(
    x: np.ndarray, labels: np.ndarray, weights: np.ndarray, new: np.ndarray
) -> np.ndarray:
    """`weights` (d + 1, C) with the columns `new` fitted (STEPS from zero) against the
    other classes' columns, kept as they are: each text's softmax is over every class,
    the kept ones' share a constant per text (their log-sum-exp, computed once). The
    cost is one pass over the kept columns and STEPS passes over the new ones."""
    new = np.asarray(new, dtype=np.intp)
    kept = np.setdiff1d(np.arange(weights.shape[1]), new)
    fixed = weights[:, kept]
    lse = np.empty(len(x), dtype=np.float32)
    for start_row in range(0, len(x), CHUNK_ROWS):
        rows = x[start_row : start_row + CHUNK_ROWS]
        lse[start_row : start_row + CHUNK_ROWS] = _logsumexp(rows @ fixed[:-1] + fixed[-1])
    column_of = np.full(weights.shape[1], -1)
    column_of[new] = np.arange(len(new))
    own = column_of[labels]  # the text's column among the new ones, -1 for a kept class
    mine = np.flatnonzero(own >= 0)

    def gradient(w: np.ndarray) -> np.ndarray:
        z = x @ w[:-1] + w[-1]
        top = np.maximum(z.max(axis=1), lse)[:, None]
        odds = np.exp(z - top)
        p = odds / (odds.sum(axis=1, keepdims=True) + np.exp(lse[:, None] - top))
        p[mine, own[mine]] -= 1.0
        return np.vstack([x.T @ p, p.sum(axis=0, keepdims=True)])

    start = np.zeros((weights.shape[0], len(new)), dtype=np.float32)
    out = weights.copy()
    out[:, new] = _adam(start, STEPS, gradient, len(x))
    return out


def _adam(
    weights: np.ndarray, steps: int, gradient_of: Callable[[np.ndarray], np.ndarray], n: int
) -> np.ndarray:
    """`steps` of full-batch Adam on the mean loss plus L2 (not on the bias row)."""
    mean = np.zeros_like(weights)
    square = np.zeros_like(weights)
    l2 = 1.0 / (INVERSE_L2 * n)
    beta1, beta2 = BETAS
    for step in range(1, steps + 1):
        gradient = gradient_of(weights) / n
        gradient[:-1] += l2 * weights[:-1]
        mean = beta1 * mean + (1 - beta1) * gradient
        square = beta2 * square + (1 - beta2) * gradient**2
        step_size = LEARNING_RATE * np.sqrt(1 - beta2**step) / (1 - beta1**step)
        weights -= step_size * mean / (np.sqrt(square) + 1e-8)
    return weights


def _softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax of finite logits, in place."""
    logits -= logits.max(axis=1, keepdims=True)
    np.exp(logits, out=logits)
    logits /= logits.sum(axis=1, keepdims=True)
    return logits


def _logsumexp(logits: np.ndarray) -> np.ndarray:
    top = logits.max(axis=1)
    return top + np.log(np.exp(logits - top[:, None]).sum(axis=1))
