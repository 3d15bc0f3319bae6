"""Which failures leave a request id's record naming where it went (an agent may have
acted: a retry is re-sent only to an `idempotent` instance), and which forget it."""

from __future__ import annotations

import pytest

from agent_reach.errors import (
    AgentFailed,
    AgentTimeout,
    AgentUnreachable,
    NoInstance,
    OutcomeUnknown,
    ReachError,
    StoreUnavailable,
)
from agent_reach.invoke.idempotency import is_final, may_have_acted


@pytest.mark.parametrize(
    ("error", "acted"),
    [
        (None, False),
        (AgentUnreachable("refused"), False),
        (NoInstance("none"), False),
        (StoreUnavailable("down"), False),
        (AgentFailed("declined", http_status=503), False),
        (AgentFailed("not mine", http_status=421), False),
        (AgentFailed("too busy", http_status=429), False),
        (AgentTimeout("late", outcome_unknown=False), False),  # the deadline passed unsent
        (AgentTimeout("late", outcome_unknown=True), True),
        (AgentFailed("failed on the way", http_status=500), True),
        (AgentFailed("connection lost after sending", outcome_unknown=True), True),
    ],
)
def test_what_may_have_acted(error: ReachError | None, acted: bool) -> None:
    assert may_have_acted(error) is acted


def test_an_unknown_outcome_not_sent_again_is_the_ids_final_answer() -> None:
    error = OutcomeUnknown("not sent again", outcome_unknown=True, sent_to=["a-1"])
    assert (error.status, error.code, is_final(error)) == (502, "outcome_unknown", True)
