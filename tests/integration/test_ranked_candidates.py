"""`POST /v1/route {"text", "top_k"}`: the k best capabilities the caller may invoke.

A secured coordinator (memory and Redis) with two groups of ten description-only tools,
and two caller keys, each granted one group: whatever the text and `top_k`, a key is
ranked only capabilities it may invoke, whether the router routes or refuses; on this
catalog (no examples: not calibrated) the semantic index orders them, each with the
router's confidence; a `top_k` outside 1-50 and a blank text are 422 naming the field.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from ranked_kit import HR, PARCEL, SHOP, secured_catalog

from agent_reach.config import Settings


@pytest.fixture
def world(settings: Settings) -> Iterator[tuple[str, dict[str, str]]]:
    """(url, key name -> key): keys `shop` and `hr`, each granted its group, and `admin`."""
    with secured_catalog(settings, {"shop": SHOP, "hr": HR}) as (url, keys, _):
        yield url, keys


def _route(url: str, key: str, body: dict[str, object]) -> httpx.Response:
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {key}"}, timeout=30) as c:
        return c.post("/v1/route", json=body)


def test_each_key_is_ranked_only_what_it_may_invoke(world: tuple[str, dict[str, str]]) -> None:
    url, keys = world
    for group, tools in (("shop", SHOP), ("hr", HR)):
        for text in (PARCEL, "I need a copy of my payslip", "xyzzy plugh", "今天天气怎么样"):
            for top_k in (1, 3, 5, 10, 50):
                answer = _route(url, keys[group], {"text": text, "top_k": top_k})
                assert answer.status_code == 200, answer.text
                ranked = [r["capability"] for r in answer.json()["ranked"]]
                # never anything of the other group, and as many as asked while there are
                assert set(ranked) <= set(tools), (group, text, ranked)
                assert len(ranked) == len(set(ranked)) == min(top_k, len(tools))


def test_description_only_tools_are_ranked_with_the_router_s_matches_first(
    world: tuple[str, dict[str, str]],
) -> None:
    url, keys = world
    decision = _route(url, keys["admin"], {"text": PARCEL, "top_k": 20}).json()
    assert decision["text"]["calibrated"]  # no examples, calibrated by the reference set
    ranked = decision["ranked"]
    assert ranked[0]["capability"] == "shop.track_parcel"
    assert len(ranked) == 20
    assert len({r["capability"] for r in ranked}) == 20
    # the router's matches lead, in its order and with its confidence; the index the rest
    confidence = {c["capability"]: c["factors"]["match"] for c in decision["candidates"]}
    head = [r for r in ranked if r["similarity"] is None]
    tail = ranked[len(head) :]
    assert head and all(r["similarity"] is not None for r in tail)
    assert [r["confidence"] for r in head] == sorted(
        (r["confidence"] for r in head), reverse=True
    )
    for r in head:
        assert r["confidence"] == confidence[r["capability"]]
    similarities = [r["similarity"] for r in tail]
    assert similarities == sorted(similarities, reverse=True)
    first = ranked[0]
    assert first["description"] == SHOP["shop.track_parcel"]
    assert first["input_schema"] == {
        "properties": {"tracking_no": "string", "carrier": {"enum": ["sf", "ups"]}},
        "required": ["tracking_no"],
    }


def test_ranked_whether_or_not_the_router_routes(world: tuple[str, dict[str, str]]) -> None:
    url, keys = world
    refused = _route(url, keys["shop"], {"text": "xyzzy plugh", "top_k": 4}).json()
    assert refused["agent_id"] is None
    assert len(refused["ranked"]) == 4
    routed = _route(url, keys["shop"], {"text": PARCEL}).json()
    assert len(routed["ranked"]) == 3  # the default
    assert routed["ranked"][0]["capability"] == "shop.track_parcel"


def test_a_named_capability_has_no_ranking(world: tuple[str, dict[str, str]]) -> None:
    url, keys = world
    answer = _route(url, keys["hr"], {"capability": "hr.leave", "top_k": 5})
    assert answer.status_code == 200, answer.text
    assert "ranked" not in answer.json()


@pytest.mark.parametrize("top_k", [0, 51, -1, 2.5, "three", None])
def test_a_top_k_outside_1_to_50_is_422_naming_it(
    world: tuple[str, dict[str, str]], top_k: object
) -> None:
    url, keys = world
    answer = _route(url, keys["shop"], {"text": PARCEL, "top_k": top_k})
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "validation_error"
    assert [p["field"] for p in error["problems"]] == ["top_k"]


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_a_blank_text_is_422(world: tuple[str, dict[str, str]], text: str) -> None:
    url, keys = world
    answer = _route(url, keys["shop"], {"text": text, "top_k": 3})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "validation_error"
