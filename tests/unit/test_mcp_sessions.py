"""The MCP face's record of open sessions: a request in flight holds a session open,
and a session is idle only once none has been for `idle_s`."""

from __future__ import annotations

from typing import Any, cast

from agent_reach.faces.mcp_sessions import LiveSessions, Opening
from agent_reach.model.keys import Principal

PRINCIPAL = Principal(key_id="k1", name="caller", domain=None, role="caller")
SERVER_SIDE = cast(Any, object())  # never used here: it carries notifications


def _opened(sessions: LiveSessions, session_id: str) -> None:
    sessions.opened(session_id, Opening(PRINCIPAL, "2025-11-25", SERVER_SIDE))


def test_only_an_initialize_that_succeeded_opens_a_session() -> None:
    sessions = LiveSessions()
    sessions.opened("a", Opening(PRINCIPAL))
    assert sessions.get("a") is None
    _opened(sessions, "b")
    live = sessions.get("b")
    assert live is not None and live.version == "2025-11-25" and live.principal == PRINCIPAL
    sessions.ended("b")
    assert sessions.get("b") is None


def test_a_request_in_flight_holds_a_session_and_its_end_restarts_the_count() -> None:
    sessions = LiveSessions(idle_s=0.0)
    _opened(sessions, "a")
    _opened(sessions, "b")
    assert sorted(sessions.idle()) == ["a", "b"]
    with sessions.using("a"):
        assert sessions.idle() == ["b"]
        with sessions.using("unknown"):
            assert sessions.idle() == ["b"]
    assert sorted(sessions.idle()) == ["a", "b"]
    sessions.idle_s = 3600.0
    assert sessions.idle() == []
    sessions.clear()
    assert not sessions.live
