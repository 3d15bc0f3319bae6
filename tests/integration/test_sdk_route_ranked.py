"""The Python SDK's `route(text=..., top_k=...)`: it sends `top_k` and reads the answer's
`ranked` as typed `RankedCandidate`s, async and blocking, against a real secured
coordinator (memory and Redis); a named capability has no ranking (None)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from ranked_kit import HR, PARCEL, SHOP, secured_catalog

from agent_reach import ReachClient, SyncReachClient
from agent_reach.config import Settings
from agent_reach.model.decisions import RankedCandidate


@pytest.fixture
def world(settings: Settings) -> Iterator[tuple[str, dict[str, str]]]:
    with secured_catalog(settings, {"shop": SHOP, "hr": HR}) as (url, keys, _):
        yield url, keys


def test_the_blocking_client_asks_top_k_and_reads_ranked(
    world: tuple[str, dict[str, str]],
) -> None:
    url, keys = world
    with SyncReachClient(url, api_key=keys["shop"]) as reach:
        for top_k in (1, 5, 10):
            decision = reach.route(text=PARCEL, top_k=top_k)
            assert decision.ranked is not None
            assert len(decision.ranked) == top_k
            assert all(isinstance(r, RankedCandidate) for r in decision.ranked)
            assert {r.capability for r in decision.ranked} <= set(SHOP)
        first = reach.route(text=PARCEL, top_k=10).ranked
        assert first is not None and first[0].capability == "shop.track_parcel"
        assert first[0].description == SHOP["shop.track_parcel"]
        assert first[0].input_schema == {
            "properties": {"tracking_no": "string", "carrier": {"enum": ["sf", "ups"]}},
            "required": ["tracking_no"],
        }
        # listed for a reason: the router's calibrated confidence, or the index's similarity
        assert first[0].confidence > 0.5 or first[0].similarity is not None
        default = reach.route(text=PARCEL).ranked
        assert default is not None and len(default) == 3  # the coordinator's default
        assert reach.route("shop.refund").ranked is None


def test_the_async_client_asks_top_k_and_reads_ranked(
    world: tuple[str, dict[str, str]],
) -> None:
    url, keys = world

    async def scenario() -> list[RankedCandidate] | None:
        async with ReachClient(url, api_key=keys["hr"]) as reach:
            return (await reach.route(text="I need my payslip for May", top_k=7)).ranked

    ranked = asyncio.run(scenario())
    assert ranked is not None and len(ranked) == 7
    assert {r.capability for r in ranked} <= set(HR)
    assert ranked[0].capability == "hr.payslip"
