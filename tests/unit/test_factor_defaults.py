"""`AR_ROUTE_AFFINITY_DEFAULT`: the factors on by default, the others weighing 0."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from agent_reach.clock import ManualClock
from agent_reach.config import Settings
from agent_reach.errors import InvalidRequest
from agent_reach.policy.source import PolicySource

ORIGINAL = "capability,health,context"  # the original deployment's compose file


def test_the_setting_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("AR_ROUTE_AFFINITY_DEFAULT", ORIGINAL)
    assert Settings().route_affinity_default == ["capability", "health", "context"]


def test_an_unknown_factor_name_is_a_clear_settings_error():
    with pytest.raises(ValidationError, match="route_affinity_default"):
        Settings(route_affinity_default="capability,speed")


def test_only_the_named_factors_of_the_preset_weigh_and_unset_keeps_them_all():
    source = PolicySource(ManualClock(), factors_on=["capability", "health", "context"])
    assert source().effective_weights == {"match": 0.30, "health": 0.25, "affinity": 0.20}
    assert PolicySource(ManualClock())().effective_weights == {
        "match": 0.30,
        "health": 0.25,
        "affinity": 0.20,
        "load": 0.15,
        "success": 0.10,
        "quality": 0.30,
    }


def test_a_policy_file_with_its_own_weights_is_used_as_written(tmp_path: Path):
    path = tmp_path / "policy.toml"
    path.write_text('preset = "dispatch"\n', encoding="utf-8")
    assert PolicySource(ManualClock(), path, ["capability", "load"])().effective_weights == {
        "match": 0.40,
        "load": 0.10,
    }
    path.write_text("[weights]\nmatch = 0.5\nlatency = 0.5\n", encoding="utf-8")
    assert PolicySource(ManualClock(), path, ["capability"])().effective_weights == {
        "match": 0.5,
        "latency": 0.5,
    }


def test_factors_that_leave_no_weight_are_refused_at_startup():
    with pytest.raises(InvalidRequest, match="AR_ROUTE_AFFINITY_DEFAULT"):
        PolicySource(ManualClock(), factors_on=["latency"])
