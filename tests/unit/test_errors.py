"""One table: every error class keeps its code and status across the wire."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from agent_reach import errors


@pytest.mark.parametrize(
    "cls",
    [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.ReachError)],
)
def test_every_error_round_trips_through_its_body(cls):
    original = cls("something happened", request_id="r-1")
    rebuilt = errors.error_from_body(original.status, original.to_body())
    assert type(rebuilt) is (cls if cls.code != "internal_error" else errors.ReachError)
    assert (rebuilt.code, rebuilt.status, rebuilt.message) == (
        cls.code,
        cls.status,
        "something happened",
    )
    assert rebuilt.details == {"request_id": "r-1"}


def test_codes_are_unique():
    classes = [
        c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.ReachError)
    ]
    codes = [c.code for c in classes]
    assert len(codes) == len(set(codes))


def test_unknown_codes_and_bodies_map_by_status():
    assert isinstance(
        errors.error_from_body(409, {"error": {"code": "in_progress"}}), errors.Conflict
    )
    odd = errors.error_from_body(500, "<html>")
    assert odd.code == "unexpected_answer" and odd.status == 500


def _every_subclass(cls: type[errors.ReachError]) -> list[type[errors.ReachError]]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_every_subclass(sub)]
    return found


def test_every_error_of_the_package_is_in_the_table_under_its_own_code():
    package = importlib.import_module("agent_reach")
    for module in pkgutil.walk_packages(package.__path__, "agent_reach."):
        if not module.name.endswith(".__main__"):  # that one runs the CLI
            importlib.import_module(module.name)
    classes = [c for c in _every_subclass(errors.ReachError) if c.__module__.startswith("agent_")]
    codes = [c.code for c in classes]

    assert len(classes) >= 40
    assert sorted(code for code in set(codes) if codes.count(code) > 1) == []
    assert [c for c in classes if errors.ERROR_CLASSES.get(c.code) is not c] == []


def test_typed_fields_read_and_write_the_wire_details_in_their_order():
    failure = errors.AgentFailed("x", http_status=503, agent_answer="busy", retryable=False)
    assert failure.outcome_unknown is None and failure.attempts == []
    failure.outcome_unknown = True
    failure.attempts = ["first"]

    assert (failure.http_status, failure.outcome_unknown, failure.connect_timeout) == (
        503,
        True,
        False,
    )
    assert (failure.retryable, errors.AgentFailed.retryable) == (False, True)
    assert failure.to_body() == {
        "error": {
            "code": "agent_error",
            "message": "x",
            "http_status": 503,
            "agent_answer": "busy",
            "outcome_unknown": True,
            "attempts": ["first"],
        }
    }
    assert list(failure.to_body()["error"]) == [
        "code",
        "message",
        "http_status",
        "agent_answer",
        "outcome_unknown",
        "attempts",
    ]


def test_a_rebuilt_error_keeps_details_named_like_keywords():
    rebuilt = errors.error_from_body(
        404, {"error": {"code": "unknown_request", "message": "m", "status": "gone"}}
    )
    assert type(rebuilt) is errors.UnknownRequest
    assert (rebuilt.status, rebuilt.details) == (404, {"status": "gone"})
    pending = errors.error_from_body(500, {"error": {"code": "task_pending", "task_id": "t"}})
    assert type(pending) is errors.TaskPending and pending.task is None
