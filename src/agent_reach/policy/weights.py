"""The factor weights routing scores instances by: the factors and the presets."""

from __future__ import annotations

from typing import Literal

FACTORS = ("match", "health", "affinity", "load", "success", "latency", "quality")
Factor = Literal["match", "health", "affinity", "load", "success", "latency", "quality"]

# From the original deployment's production data (docs/policy.md lists them), but for
# `quality`, which it did not have: 0.30, with which bench/quality.py's instance that
# bounces half its requests gets under 10 % of the last 500 of 1,000 requests (0.20:
# 11 %; 0.25: 7.8-9.2 %, too close; 0.30: 0 % in every run). The factor is relative to
# the prior (1 with no evidence against an instance), so a half-bouncing instance sits
# about 0.33 below its sibling: 0.33 x 0.30 with its success gap (0.05) is the whole
# load factor (0.15), and no load imbalance routes to it while its bounces are in the
# window; a new instance loses nothing (docs/mesh.md, "Quality").
QUALITY_WEIGHT = 0.30
PRESETS: dict[str, dict[str, float]] = {
    "default": {
        "match": 0.30,
        "health": 0.25,
        "affinity": 0.20,
        "load": 0.15,
        "success": 0.10,
        "quality": QUALITY_WEIGHT,
    },
    "dispatch": {
        "match": 0.40,
        "health": 0.30,
        "latency": 0.20,
        "load": 0.10,
        "quality": QUALITY_WEIGHT,
    },
}
