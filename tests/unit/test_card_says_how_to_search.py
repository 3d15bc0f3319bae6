"""The coordinator's A2A card tells an A2A client how to find the few skills it needs."""

from __future__ import annotations

from agent_reach.faces.a2a_card import agent_card


def test_the_card_names_ranked_routes_and_find_tools() -> None:
    card = agent_card("http://127.0.0.1:8500", "1", [], secured=False)
    assert '"top_k"' in card["description"]
    assert "POST /v1/route" in card["description"]
    assert "find_tools" in card["description"]
