"""The demo's deployment hand-off on a real coordinator (both backends), real SDK agents."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator

import httpx
import pytest
from rich.console import Console

from agent_reach.config import Settings
from agent_reach.demo.deployment import handoff_agents, play_handoff
from agent_reach.sdk.client import ReachClient
from agent_reach.testing.servers import ServerThread, run_coordinator, stop_all
from agent_reach.testing.waiting import wait_until


@pytest.fixture
def coordinator(settings: Settings) -> Iterator[str]:
    with run_coordinator(settings) as (url, _):
        agents = handoff_agents(url)
        servers = []
        for agent in agents:
            server = ServerThread(agent.app)
            agent.endpoint_url = f"{server.url}/invoke"
            servers.append(server.start())
        try:
            yield url
        finally:
            stop_all(servers)


def test_codegen_hands_off_to_deploy_one_hop_further_with_only_its_projection(
    coordinator: str,
) -> None:
    with httpx.Client(base_url=coordinator, timeout=10) as http:
        wait_until(
            lambda: (
                {"codegen.generate", "deploy.execute"}
                <= set(http.get("/v1/capabilities").json()["capabilities"])
            ),
            "both agents to register",
        )

        async def play() -> object:
            async with ReachClient(coordinator) as client:
                return await play_handoff(Console(file=io.StringIO()), client, coordinator)

        handoff = asyncio.run(play())

        assert handoff.is_expected, handoff
        assert handoff.deploy_saw == {
            "build": {"artifact_url": "https://artifacts.shop.internal/shop-web/9f1c2e7.tar.gz"},
            "deploy": {"environment": "staging"},
        }  # never the pipeline, the review or the build's sha256
        assert (handoff.codegen_hop, handoff.deploy_hop) == (4, 3)
        spans = http.get(f"/v1/traces/{handoff.trace_id}").json()["spans"]
    by_id = {s["span_id"]: s for s in spans}
    invokes = [s for s in spans if s["kind"] == "invoke"]
    assert [s["name"] for s in invokes] == ["codegen.generate", "deploy.execute"]
    parent = by_id[invokes[1]["parent_id"]]
    assert (parent["kind"], parent["agent_id"]) == ("attempt", "codegen-01")
